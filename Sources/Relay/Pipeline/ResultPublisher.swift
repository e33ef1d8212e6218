import Kafka
import Logging
import ServiceSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Publishes an event's records (its result, and a removed-token record or a dead letter) until Kafka
/// acknowledges them: transient refusals are retried (after `retryBackoff`), a record Kafka refuses for good
/// is replaced by its fallback, and a fatal error or a refused fallback sets `failure`, which stops the relay.
///
/// No task and no continuation per record: records go to librdkafka at once and the event's completion runs
/// from the delivery-report callbacks, on the producer's poll thread. Only a retry after a transient error
/// (rare) waits on a task for its backoff.
///
/// It also knows whether results are stuck: records waiting for their delivery reports while none was
/// acknowledged for a while (the broker refuses, or librdkafka retries for `message.timeout.ms`).
final class ResultPublisher: Sendable {
    private let producer: KafkaProducer
    private let retryBackoff: Duration
    private let failure: Latch<String>
    private let metrics: RelayMetrics
    private let logger: Logger
    /// Whether `logger` writes trace lines, read once (its level cannot change; asking per record copies its
    /// handler).
    private let logsTrace: Bool
    /// Records waiting for their delivery reports.
    private let waiting = Atomic<Int>(0)
    /// Publishing's progress, counted: a record acknowledged, or the first record sent after none was waiting.
    /// Counted, not timed (no clock read per record): `watch` times a count from its first look at it.
    private let progress = Atomic<UInt64>(0)
    private let watch: Mutex<StallWatch>
    /// Set when the relay gives up what is in flight (shutdown deadline, failure): no more retries.
    private let stopped = Atomic<Bool>(false)
    /// Where results' JSON is written as they are produced.
    private let buffers = ByteBufferPool.forRecords()

    init(producer: KafkaProducer, retryBackoff: Duration, failure: Latch<String>, metrics: RelayMetrics, logger: Logger) {
        self.producer = producer
        self.retryBackoff = retryBackoff
        self.failure = failure
        self.metrics = metrics
        self.logger = logger
        self.logsTrace = logger.logLevel <= .trace
        self.watch = Mutex(StallWatch(now: Self.monotonicNanoseconds()))
    }

    /// How long records have waited without any acknowledgement, as far as the looks so far have seen (a look
    /// at a progress count not seen before starts the time again: `StallWatch`); `nil` while none waits.
    /// Each read is a look: the readiness probe and the metrics scrape both take one.
    var stall: (duration: Duration, waiting: Int)? {
        // The count of waiting records first (acquiring): a record sent after none waited counted its progress
        // before it counted itself as waiting (`attempt`), so a look that sees it waiting sees that progress.
        let waiting = waiting.load(ordering: .acquiring)
        let progress = progress.load(ordering: .relaxed)
        let now = Self.monotonicNanoseconds()
        return watch.withLock { $0.look(progress: progress, waiting: waiting, now: now) }
    }

    /// Stops retrying: records still waiting for a retry, and records published from now on, end as not
    /// published. Records already with librdkafka get their reports (or are withdrawn by the producer).
    func stop() {
        stopped.store(true, ordering: .releasing)
    }

    /// Publishes `records` and calls `completion` once, with `event`, after the last one's delivery report:
    /// `true` when Kafka acknowledged all of them, `false` when the relay gives the event up (shutdown,
    /// failure), whose offset must then never be stored.
    ///
    /// `completion` runs on the producer's poll thread (or, for a record librdkafka refused at once, on the
    /// caller's thread): it must not block. No allocation for the result record: what the publisher keeps of
    /// the event is in the event (`PublishedEvent`), which is also that record's delivery handler (a closure
    /// that captures only its owner allocates nothing); another record (a removal, a dead letter) and a retry
    /// have a handler of their own.
    func publish(_ records: EventRecords, of event: PublishedEvent, completion: @escaping @Sendable (PublishedEvent, Bool) -> Void) {
        event.remaining.store(records.count, ordering: .relaxed)
        event.result = records.result
        event.publisher = self
        event.completion = completion
        // Every field above is set before the first record goes to librdkafka, whose queue orders it before
        // the report that reads them.
        attempt(records.result, of: event, handler: event)
        if let other = records.other { attempt(other, of: event, handler: RecordDelivery(other, of: event, publisher: self)) }
    }

    /// The delivery handler of any other record, and of every retry and replacement.
    private final class RecordDelivery: KafkaDeliveryHandler {
        let record: OutgoingRecord
        let event: PublishedEvent
        let publisher: ResultPublisher

        init(_ record: OutgoingRecord, of event: PublishedEvent, publisher: ResultPublisher) {
            self.record = record
            self.event = event
            self.publisher = publisher
        }

        func delivered(_ report: Result<KafkaDeliveryReport, KafkaError>) {
            publisher.delivered(report, record: { record }, of: event)
        }
    }

    private func attempt(_ record: OutgoingRecord, of event: PublishedEvent, handler: (any KafkaDeliveryHandler)? = nil) {
        guard !stopped.load(ordering: .acquiring), !failure.isSet else {
            event.recordDone(acknowledged: false)
            return
        }
        // The first record sent after none waited is progress, counted before the record counts as waiting
        // (`stall` reads them in the other order). Two senders may both count it: more progress, no harm.
        if waiting.load(ordering: .relaxed) == 0 { progress.wrappingAdd(1, ordering: .relaxed) }
        waiting.wrappingAdd(1, ordering: .releasing)
        let handler = handler ?? RecordDelivery(record, of: event, publisher: self)
        do {
            try record.withValue(buffers) { (value) throws(KafkaError) in
                try producer.produce(topic: record.topic, key: record.key, value: value, headers: record.headers, handler: handler)
            }
        } catch {
            waiting.wrappingSubtract(1, ordering: .relaxed)
            refused(record, of: event, error)
        }
    }

    /// `record` is read only when the report is a failure, or logged (a result record is large: not copied
    /// for every acknowledgement).
    fileprivate func delivered(_ report: Result<KafkaDeliveryReport, KafkaError>, record: () -> OutgoingRecord, of event: PublishedEvent) {
        waiting.wrappingSubtract(1, ordering: .relaxed)
        switch report {
        case .success(let report):
            progress.wrappingAdd(1, ordering: .relaxed)
            if logsTrace {
                logger.trace("record acknowledged", metadata: [
                    "topic": "\(report.topic)", "partition": "\(report.partition)", "offset": "\(report.offset)",
                    "key": "\(record().key.map { String(decoding: $0, as: UTF8.self) } ?? "")",
                ])
            }
            event.recordDone(acknowledged: true)
        case .failure(let error):
            refused(record(), of: event, error)
        }
    }

    /// Kafka refused `record` (at once, or in its delivery report): retry, replace, or give up.
    private func refused(_ record: OutgoingRecord, of event: PublishedEvent, _ error: KafkaError) {
        metrics.publishFailures.increment()
        switch error.sendFailure {
        case .closed:
            event.recordDone(acknowledged: false)
        case .fatal:
            failure.set("Kafka producer fatal error, results can no longer be published: \(error)")
            event.recordDone(acknowledged: false)
        case .recordRejected:
            guard let smaller = record.smallerForm() else {
                failure.set("Kafka refuses even the smallest form of a record for \(record.topic) (check the topic's configuration): \(error)")
                event.recordDone(acknowledged: false)
                return
            }
            logger.error("Kafka refused a record for good; publishing its smaller form instead", metadata: [
                "topic": "\(record.topic)", "error": "\(error)",
            ])
            metrics.recordsReplaced.increment()
            attempt(smaller, of: event)
        case .retriable:
            logger.error("publishing a record failed; retrying", metadata: ["topic": "\(record.topic)", "error": "\(error)"])
            // Counted as waiting meanwhile, so that a broker refusing everything shows as a stall.
            waiting.wrappingAdd(1, ordering: .relaxed)
            Task { [retryBackoff] in
                try? await Task.sleep(for: retryBackoff)
                // Attempt first: `waiting` never passes through 0, which would count as progress.
                self.attempt(record, of: event)
                self.waiting.wrappingSubtract(1, ordering: .relaxed)
            }
        }
    }

    private static func monotonicNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}

/// What `ResultPublisher` keeps of an event while its records are on their way to Kafka, as part of the
/// event itself (`InFlightEvent` is one): publishing allocates nothing per event. It is the delivery handler
/// of the event's result record.
///
/// Invariant for `@unchecked Sendable`: `publish` sets the fields before it hands the first record to
/// librdkafka, whose queue orders that before every delivery report, where they are read; the counts are
/// atomic.
class PublishedEvent: KafkaDeliveryHandler, @unchecked Sendable {
    /// Records whose reports have not come yet, and whether any was not acknowledged.
    fileprivate let remaining = Atomic<Int>(0)
    fileprivate let failed = Atomic<Bool>(false)
    fileprivate var result: OutgoingRecord?
    fileprivate var publisher: ResultPublisher?
    fileprivate var completion: (@Sendable (PublishedEvent, Bool) -> Void)?

    init() {}

    func delivered(_ report: Result<KafkaDeliveryReport, KafkaError>) {
        publisher!.delivered(report, record: { self.result! }, of: self)
    }

    fileprivate func recordDone(acknowledged: Bool) {
        if !acknowledged { failed.store(true, ordering: .relaxed) }
        // The last report decides; the atomic's ordering makes every earlier `failed` store visible.
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            let completion = completion!
            // Its records are done with: the event no longer holds them, nor the publisher.
            result = nil
            publisher = nil
            self.completion = nil
            completion(self, !failed.load(ordering: .relaxed))
        }
    }
}
