import APNsCore
import Instrumentation
import Kafka
import Metrics
import ServiceContextModule
import Tracing

/// Trace context through the relay: an event's trace continues from the producer's W3C `traceparent` /
/// `tracestate` headers, through a `process` span per event, a client span per APNs attempt and a `publish`
/// span for its records, to the result, removed-token/-channel and dead-letter records, which carry the
/// context on in the same headers.
///
/// Off (no tracer), the relay neither reads nor writes trace headers: the per-event cost is one branch on an
/// optional. The tracer is swift-distributed-tracing's API; the relay's process wires swift-otel's
/// (`RelayApp`), tests may pass any other.
///
/// Names and attributes follow OpenTelemetry's messaging and HTTP conventions: the consumer's span links to
/// the producer's context and, by default (`parentIsProducer`), is also its child, so the common trace views
/// show one tree.
package struct EventTracing: Sendable {
    package struct Configuration: Sendable, Hashable {
        /// The producer's context is the parent of the event's `process` span (as well as linked from it);
        /// when `false`, each event starts a trace of its own that links to the producer's.
        package var parentIsProducer = true
        /// The consumer group (an attribute of every `process` span).
        package var consumerGroup = ""
        package init() {}
    }

    package let tracer: any Tracer
    package let configuration: Configuration
    /// `traceparent` headers that are not W3C trace context (the event starts a new trace).
    let malformedHeaders: Counter

    package init(tracer: any Tracer, configuration: Configuration) {
        self.tracer = tracer
        self.configuration = configuration
        self.malformedHeaders = Counter(label: "apns_relay_trace_context_malformed_total")
    }

    /// Starts the trace of a consumed record: its `process` span, child of (and linked to) the producer's
    /// context when the record carries a valid one.
    func begin(_ message: KafkaConsumerMessage) -> EventTrace {
        var producer = ServiceContext.topLevel
        if message.headers.contains(where: { $0.name == TraceHeaders.parent }) {
            // The tracer leaves the context empty when the header is not W3C trace context (it parses it once).
            tracer.extract(message.headers, into: &producer, using: KafkaHeadersExtractor())
            if producer.isEmpty { malformedHeaders.increment() }
        }
        let hasProducer = !producer.isEmpty
        let span = tracer.startSpan(
            "\(message.topic) process", context: hasProducer && configuration.parentIsProducer ? producer : .topLevel,
            ofKind: .consumer)
        if hasProducer { span.addLink(SpanLink(context: producer, attributes: [:])) }
        if span.isRecording {
            var attributes = SpanAttributes()
            attributes["messaging.system"] = "kafka"
            attributes["messaging.operation.type"] = "process"
            attributes["messaging.operation.name"] = "process"
            attributes["messaging.destination.name"] = message.topic
            attributes["messaging.destination.partition.id"] = "\(message.partition)"
            attributes["messaging.kafka.offset"] = Int(message.offset)
            attributes["messaging.consumer.group.name"] = configuration.consumerGroup
            span.attributes.merge(attributes)
        }
        return EventTrace(tracer: tracer, process: span)
    }
}

/// One event's spans. Made on the consumer loop, then used from the APNs event loop that answers its
/// attempts and the producer thread that acknowledges its records: it holds only spans, which are
/// thread-safe by contract (`Span` has reference semantics and synchronizes its own mutations).
final class EventTrace: Sendable {
    private let tracer: any Tracer
    private let process: any Span

    fileprivate init(tracer: any Tracer, process: any Span) {
        self.tracer = tracer
        self.process = process
    }

    /// The decoded event's id, once known.
    func identify(eventID: String) {
        if process.isRecording { process.attributes["messaging.message.id"] = eventID }
    }

    /// Starts the client span of APNs attempt `number` (1 for the first) to `host`; none when the event's
    /// trace is not sampled (its children would not be either: sampling follows the parent).
    func attemptStarted(number: Int, host: String) -> (any Span)? {
        guard process.isRecording else { return nil }
        let span = tracer.startSpan("POST", context: process.context, ofKind: .client)
        if span.isRecording {
            var attributes = SpanAttributes()
            attributes["http.request.method"] = "POST"
            attributes["server.address"] = host
            attributes["server.port"] = 443
            attributes["apns.attempt"] = number
            if number > 1 { attributes["http.request.resend_count"] = number - 1 }
            span.attributes.merge(attributes)
        }
        return span
    }

    /// Ends an attempt's span with what APNs answered (or why nothing came).
    func attemptEnded(_ span: any Span, response: APNsResponse?, failure: String?) {
        if span.isRecording {
            if let response {
                span.attributes["http.response.status_code"] = response.status
                if let reason = response.reason { span.attributes["apns.reason"] = reason.rawValue }
                if let id = response.apnsID { span.attributes["apns.id"] = id }
                if let connection = response.connectionID { span.attributes["apns.connection"] = connection }
                if response.status >= 400 { span.setStatus(SpanStatus(code: .error, message: response.reason?.rawValue)) }
            } else if let failure {
                span.attributes["error.type"] = failure
                span.setStatus(SpanStatus(code: .error, message: failure))
            }
        }
        span.end()
    }

    /// Starts the span that publishes the event's records to `topic` (its result's topic) and sets each
    /// record's `traceparent` / `tracestate` to it, replacing any the record copied from the event (a dead
    /// letter keeps the event's other headers). A trace that is not sampled gets no publish span: its records
    /// carry the `process` span's context, so whoever reads them continues the same (unsampled) trace.
    func publishing(_ records: inout EventRecords, topic: String) -> (any Span)? {
        let span = process.isRecording ? tracer.startSpan("\(topic) publish", context: process.context, ofKind: .producer) : nil
        if let span {
            var attributes = SpanAttributes()
            attributes["messaging.system"] = "kafka"
            attributes["messaging.operation.type"] = "send"
            attributes["messaging.operation.name"] = "publish"
            attributes["messaging.destination.name"] = topic
            attributes["messaging.batch.message_count"] = records.count
            span.attributes.merge(attributes)
        }
        var headers: [KafkaHeader] = []
        tracer.inject(span?.context ?? process.context, into: &headers, using: KafkaHeadersInjector())
        records.update { record in
            record.headers.removeAll { $0.name == TraceHeaders.parent || $0.name == TraceHeaders.state }
            record.headers += headers
        }
        return span
    }

    /// Ends the event's spans once its records are in Kafka (or given up): `outcome` is the result's.
    func end(publish: (any Span)?, outcome: String?, reason: String?, published: Bool) {
        if let publish {
            if !published { publish.setStatus(SpanStatus(code: .error, message: "not published")) }
            publish.end()
        }
        if process.isRecording {
            if let outcome { process.attributes["apns_relay.outcome"] = outcome }
            if let reason { process.attributes["apns_relay.reason"] = reason }
            if !published { process.setStatus(SpanStatus(code: .error, message: "no result published; the event is redone")) }
        }
        process.end()
    }
}

/// The W3C trace context header names.
enum TraceHeaders {
    static let parent = "traceparent"
    static let state = "tracestate"
}

/// Reads trace headers from a Kafka record's headers (the last of a name wins, as Kafka clients read them).
struct KafkaHeadersExtractor: Extractor {
    func extract(key: String, from carrier: [KafkaHeader]) -> String? {
        carrier.last { $0.name == key }?.value.map { String(decoding: $0, as: UTF8.self) }
    }
}

/// Writes trace headers into a Kafka record's headers (replacing one of the same name).
struct KafkaHeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [KafkaHeader]) {
        carrier.removeAll { $0.name == key }
        carrier.append(KafkaHeader(name: key, value: Array(value.utf8)))
    }
}
