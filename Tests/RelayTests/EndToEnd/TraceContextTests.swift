import Foundation
import Kafka
import Logging
import RelaySandbox
import ServiceSupport
import TestSupport
import Testing

/// Trace context (issue #25), Kafka → relay → mock APNs → Kafka, with spans exported over OTLP/HTTP to a
/// collector in the test (`OTLPCollector`, which decodes the protobuf itself).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct TraceContextTests {
    let logger = Logger.quiet("trace-context")
    static let producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let producerSpan = "00f067aa0ba902b7"

    private func record(_ name: String, _ n: Int, traceparent: String?, tracestate: String? = nil) -> RelaySandbox.InputRecord {
        var headers: [KafkaHeader] = []
        if let traceparent { headers.append(KafkaHeader(name: "traceparent", value: Array(traceparent.utf8))) }
        if let tracestate { headers.append(KafkaHeader(name: "tracestate", value: Array(tracestate.utf8))) }
        return RelaySandbox.InputRecord(
            key: Array("\(name)\(n)".utf8),
            value: SampleEvents.event(id: "\(name)\(n)", deviceToken: SampleEvents.token(n), topic: "com.example.a"),
            headers: headers)
    }

    /// (trace id, span id, flags) of a record's `traceparent`, if it has one.
    private func traceparent(_ record: OutputReader.Record) -> (trace: String, span: String, flags: String)? {
        guard let value = record.headers.last(where: { $0.name == "traceparent" })?.value else { return nil }
        let parts = String(decoding: value, as: UTF8.self).split(separator: "-").map(String.init)
        guard parts.count == 4, parts[0] == "00" else { return nil }
        return (parts[1], parts[2], parts[3])
    }

    @Test func resultsContinueTheProducersTraceAndTheSpansReachTheCollector() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        try await withSandbox(logger: logger) { sandbox in
            let traced = (0..<5).map {
                record("traced", $0, traceparent: "00-\(Self.producerTrace)-\(Self.producerSpan)-01", tracestate: "vendor=value")
            }
            let plain = (5..<10).map { record("plain", $0, traceparent: nil) }
            let malformed = (10..<13).map { record("malformed", $0, traceparent: "00-not-a-trace-context") }
            try await sandbox.produce(records: traced + plain + malformed)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = try await withRelay(sandbox, overrides: ["tracing.otlpEndpoint": collector.endpoint], logger: logger) { _ in
                try await reader.results(count: 13, timeout: .seconds(60))
            }
            await reader.close()
            let byKey = Dictionary(results.map { ($0.keyString, $0) }) { first, _ in first }

            // The result records carry the context on: the producer's trace, a span of the relay's.
            var resultSpans: [String: String] = [:]
            for event in traced {
                let key = String(decoding: event.key!, as: UTF8.self)
                let result = try #require(byKey[key], "\(key) has a result")
                #expect(result.json?["outcome"] as? String == "delivered")
                let context = try #require(traceparent(result), "\(key)'s result has a traceparent: \(result.headers)")
                #expect(context.trace == Self.producerTrace, "the producer's trace goes on")
                #expect(context.span != Self.producerSpan, "with a span of the relay's as the parent")
                #expect(context.flags == "01", "sampled, as the producer said")
                let state = result.headers.last(where: { $0.name == "tracestate" }).flatMap { $0.value.map { String(decoding: $0, as: UTF8.self) } }
                #expect(state == "vendor=value", "the producer's tracestate goes on")
                resultSpans[key] = context.span
            }
            var newTraces: Set<String> = []
            for event in plain + malformed {
                let key = String(decoding: event.key!, as: UTF8.self)
                let result = try #require(byKey[key], "\(key) has a result")
                #expect(result.json?["outcome"] as? String == "delivered", "a malformed traceparent never fails an event")
                let context = try #require(traceparent(result), "tracing is on: \(key)'s result starts a trace")
                #expect(context.trace != Self.producerTrace)
                newTraces.insert(context.trace)
            }
            #expect(newTraces.count == plain.count + malformed.count, "each event without a context has a trace of its own")

            // The spans, as the collector decoded them (the exporter sends what is left when the relay stops).
            let spans = try await waitForSpans(collector, atLeast: 13 * 3)
            #expect(collector.requestLines.allSatisfy { $0.hasPrefix("POST /v1/traces ") }, "\(collector.requestLines)")
            let producerTrace = Self.producerTrace.hexBytes, producerSpan = Self.producerSpan.hexBytes
            let processes = spans.filter { $0.kind == 5 && $0.name == "\(sandbox.options.inputTopic) process" }
            #expect(processes.count == 13, "one process span per event: \(processes.count)")
            for process in processes where process.traceID == producerTrace {
                #expect(process.parentSpanID == producerSpan, "the producer's span is the parent")
                #expect(process.links.contains { $0.traceID == producerTrace && $0.spanID == producerSpan }, "and linked")
                #expect(process.string("messaging.system") == "kafka")
                #expect(process.string("messaging.destination.name") == sandbox.options.inputTopic)
                #expect(process.int("messaging.kafka.offset") != nil)
                #expect(process.string("apns_relay.outcome") == "delivered")
                #expect(process.string("messaging.message.id")?.hasPrefix("traced") == true)
                let children = spans.filter { $0.parentSpanID == process.spanID }
                let attempt = try #require(children.first { $0.kind == 3 }, "an APNs attempt span under \(process)")
                #expect(attempt.name == "POST")
                #expect(attempt.int("http.response.status_code") == 200)
                #expect(attempt.string("apns.id") != nil)
                #expect(attempt.int("apns.connection") != nil, "the connection that carried it")
                let publish = try #require(children.first { $0.kind == 4 }, "a publish span under \(process)")
                #expect(publish.name == "\(sandbox.options.topics.results) publish")
                #expect(resultSpans.values.contains(publish.spanID.hex), "the result's parent is the publish span")
            }
            #expect(processes.filter { $0.traceID == producerTrace }.count == traced.count)
            #expect(processes.filter { $0.links.isEmpty && $0.parentSpanID.isEmpty }.count == plain.count + malformed.count,
                    "events without a (valid) producer context start a trace, unlinked")
        }
    }

    /// Removed-token records and dead letters carry the context as results do (one publish span for all of
    /// an event's records), and a trace that is not sampled goes on unsampled: its records carry the trace
    /// with flags `00` and no span of it is exported.
    @Test func everyRecordOfAnEventCarriesItsContextAndUnsampledTracesStayUnsampled() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        try await withSandbox(logger: logger) { sandbox in
            let quietTrace = "0af7651916cd43dd8448eb211c80319c"
            sandbox.apns.registry.unregister(SampleEvents.token(1), sinceMilliseconds: 1_700_000_000_000)
            let gone = record("gone", 1, traceparent: "00-\(Self.producerTrace)-\(Self.producerSpan)-01")
            var broken = record("broken", 2, traceparent: "00-\(Self.producerTrace)-\(Self.producerSpan)-01")
            broken.value = Array(#"{"id": "broken", "#.utf8)
            broken.headers.append(KafkaHeader(name: "x-origin", value: Array("checkout".utf8)))
            let quiet = record("quiet", 3, traceparent: "00-\(quietTrace)-\(Self.producerSpan)-00")
            let root = record("root", 4, traceparent: nil)
            try await sandbox.produce(records: [gone, broken, quiet, root])
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            // Parent-based sampling with no root sampled: the producer's flag decides.
            let overrides = ["tracing.otlpEndpoint": collector.endpoint, "tracing.sampleRatio": "0"]
            let records = try await withRelay(sandbox, overrides: overrides, logger: logger) { _ in
                try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 4 && records.contains { $0.topic == topics.removedTokens }
                        && records.contains { $0.topic == topics.deadLetters }
                }
            }
            await reader.close()
            func only(_ topic: String, _ key: String) throws -> OutputReader.Record {
                try #require(records.first { $0.topic == topic && $0.keyString == key }, "a \(topic) record keyed \(key)")
            }

            let goneResult = try #require(traceparent(try only(topics.results, "gone1")), "the result carries the context")
            let removed = try #require(traceparent(try only(topics.removedTokens, SampleEvents.token(1))), "so does the removed-token record")
            #expect(goneResult.trace == Self.producerTrace && goneResult.flags == "01" && goneResult.span != Self.producerSpan)
            #expect(removed.trace == goneResult.trace && removed.span == goneResult.span, "both are children of the event's publish span")

            let brokenResult = try only(topics.results, "broken2")
            #expect(brokenResult.json?["outcome"] as? String == "invalid")
            let letter = try only(topics.deadLetters, "broken2")
            #expect(letter.value == broken.value, "the dead letter keeps the original bytes")
            #expect(letter.headers.contains { $0.name == "x-origin" }, "and the event's other headers: \(letter.headers)")
            #expect(letter.headers.filter { $0.name == "traceparent" }.count == 1, "its traceparent is replaced, not added: \(letter.headers)")
            let letterContext = try #require(traceparent(letter))
            let brokenContext = try #require(traceparent(brokenResult))
            #expect(letterContext.trace == Self.producerTrace && letterContext.span != Self.producerSpan)
            #expect(letterContext.span == brokenContext.span)

            let quietResult = try #require(traceparent(try only(topics.results, "quiet3")))
            #expect(quietResult.trace == quietTrace && quietResult.flags == "00", "the producer's unsampled trace goes on unsampled")
            #expect(quietResult.span != Self.producerSpan, "with the relay's span as the parent")
            let rootResult = try #require(traceparent(try only(topics.results, "root4")), "tracing is on: a trace is started")
            #expect(rootResult.flags == "00", "and not sampled at tracing.sampleRatio 0")

            // Spans: gone (process, attempt, publish) and broken (process, publish); nothing of the others.
            let spans = try await waitForSpans(collector, atLeast: 5)
            let traces = Set(spans.map(\.traceID.hex))
            #expect(traces == [Self.producerTrace], "only the sampled traces are exported: \(traces)")
        }
    }

    @Test func withTracingOffNoTraceHeaderIsReadOrWritten() async throws {
        try await withSandbox(logger: logger) { sandbox in
            try await sandbox.produce(records: [
                record("traced", 0, traceparent: "00-\(Self.producerTrace)-\(Self.producerSpan)-01"),
                record("plain", 1, traceparent: nil),
            ])
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = try await withRelay(sandbox, logger: logger) { _ in try await reader.results(count: 2, timeout: .seconds(60)) }
            await reader.close()
            for result in results {
                #expect(result.json?["outcome"] as? String == "delivered")
                #expect(!result.headers.contains { $0.name == "traceparent" || $0.name == "tracestate" }, "\(result.keyString): \(result.headers)")
            }
        }
    }

    /// A collector that is down (nothing listens on its port) costs spans, never events.
    @Test func aDeadCollectorLosesSpansNeverEvents() async throws {
        let closed = try OTLPCollector()
        let endpoint = closed.endpoint
        closed.stop()
        try await withSandbox(logger: logger) { sandbox in
            let events = (0..<50).map { record("event", $0, traceparent: "00-\(Self.producerTrace)-\(Self.producerSpan)-01") }
            try await sandbox.produce(records: events)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = try await withRelay(sandbox, overrides: ["tracing.otlpEndpoint": endpoint, "tracing.exportTimeoutMs": "500"], logger: logger) { _ in
                try await reader.results(count: events.count, timeout: .seconds(60))
            }
            await reader.close()
            #expect(Set(results.map(\.keyString)).count == events.count)
            #expect(results.allSatisfy { $0.json?["outcome"] as? String == "delivered" })
            #expect(results.allSatisfy { traceparent($0)?.trace == Self.producerTrace }, "the context still goes on")
        }
    }

    /// The counters and the log, from a relay process (its `/metrics`): malformed `traceparent` headers are
    /// counted; a collector that is down counts failed exports and is logged once, not once per batch.
    @Test func malformedHeadersAndFailedExportsAreCountedAndLoggedOnce() async throws {
        let closed = try OTLPCollector()
        let endpoint = closed.endpoint
        closed.stop()
        try await withSandbox(logger: logger) { sandbox in
            let port = String(try freeLocalPort())
            var environment = sandbox.relayEnvironment(groupID: "tracing-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_LOG_LEVEL"] = "info"
            environment["APNS_RELAY_ADMIN_HOST"] = "127.0.0.1"
            environment["APNS_RELAY_ADMIN_PORT"] = port
            environment["APNS_RELAY_TRACING_OTLP_ENDPOINT"] = endpoint
            environment["APNS_RELAY_TRACING_EXPORT_TIMEOUT_MS"] = "500"
            environment["OTEL_BSP_SCHEDULE_DELAY"] = "100"  // OpenTelemetry's own variable: export every 100 ms
            let relay = try RelayProcess(environment: environment)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let malformed = (0..<20).map { record("malformed", $0, traceparent: "01-\(Self.producerTrace)-\(Self.producerSpan)") }
            let traced = (20..<40).map { record("traced", $0, traceparent: "00-\(Self.producerTrace)-\(Self.producerSpan)-01") }
            for (index, batch) in [malformed, traced].enumerated() {
                try await sandbox.produce(records: batch)
                // Batches of spans a while apart: several exports fail.
                // (`results` returns the records read during the call.)
                _ = try await reader.results(count: batch.count, timeout: .seconds(60))
                try await eventually("an export failed", within: .seconds(30)) {
                    (metric(try await http("http://127.0.0.1:\(port)/metrics").body, "apns_relay_trace_exports_failed_total") ?? 0) >= Double(index + 1)
                }
            }
            let metrics = try await http("http://127.0.0.1:\(port)/metrics").body
            #expect(metric(metrics, "apns_relay_trace_context_malformed_total") == 20, "\(metrics.split(separator: "\n").filter { $0.contains("trace") })")
            #expect(await relay.terminate(timeout: .seconds(30)) == 0)
            await reader.close()
            let failures = relay.log.components(separatedBy: "Failed to export batch").count - 1
            #expect(failures == 1, "a collector that is down is logged once a minute, not per batch: \(failures)")
        }
    }

    private func waitForSpans(_ collector: OTLPCollector, atLeast count: Int) async throws -> [ExportedSpan] {
        // The exporter announces nothing the test can wait on; the collector's count is polled with a deadline.
        try await eventually("the collector has at least \(count) spans", within: .seconds(20), every: .milliseconds(20)) {
            collector.spans.count >= count
        }
        return collector.spans
    }
}

private extension String {
    var hexBytes: [UInt8] {
        var bytes: [UInt8] = []
        var index = startIndex
        while index < endIndex {
            let next = self.index(index, offsetBy: 2)
            bytes.append(UInt8(self[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }
}
