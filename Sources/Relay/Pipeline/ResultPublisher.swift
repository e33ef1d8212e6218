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
    /// Records waiting for their delivery reports, and when publishing last made progress (a record
    /// acknowledged, or the first record sent after none was waiting; monotonic nanoseconds).
    private let waiting = Atomic<Int>(0)
    private let progress = Atomic<UInt64>(0)
    /// Set when the relay gives up what is in flight (shutdown deadline, failure): no more retries.
    private let stopped = Atomic<Bool>(false)

    init(producer: KafkaProducer, retryBackoff: Duration, failure: Latch<String>, metrics: RelayMetrics, logger: Logger) {
        self.producer = producer
        self.retryBackoff = retryBackoff
        self.failure = failure
        self.metrics = metrics
        self.logger = logger
    }

    /// How long records have waited without any acknowledgement; `nil` while none waits.
    var stall: (duration: Duration, waiting: Int)? {
        let waiting = waiting.load(ordering: .relaxed)
        guard waiting > 0 else { return nil }
        let nanoseconds = Self.monotonicNanoseconds() &- progress.load(ordering: .relaxed)
        return (.nanoseconds(Int64(clamping: nanoseconds)), waiting)
    }

    /// Stops retrying: records still waiting for a retry, and records published from now on, end as not
    /// published. Records already with librdkafka get their reports (or are withdrawn by the producer).
    func stop() {
        stopped.store(true, ordering: .releasing)
    }

    /// Publishes `records` and calls `completion` once, after the last one's delivery report: `true` when
    /// Kafka acknowledged all of them, `false` when the relay gives the event up (shutdown, failure), whose
    /// offset must then never be stored.
    ///
    /// `completion` runs on the producer's poll thread (or, for a record librdkafka refused at once, on the
    /// caller's thread): it must not block.
    func publish(_ records: [OutgoingRecord], completion: @escaping @Sendable (Bool) -> Void) {
        let event = Publication(records: records.count, completion: completion)
        for record in records { attempt(record, of: event) }
    }

    /// The records of one event still waiting for their reports, and whether all so far were acknowledged.
    private final class Publication: Sendable {
        private let remaining: Atomic<Int>
        private let failed = Atomic<Bool>(false)
        private let completion: @Sendable (Bool) -> Void

        init(records: Int, completion: @escaping @Sendable (Bool) -> Void) {
            remaining = Atomic(records)
            self.completion = completion
        }

        func recordDone(acknowledged: Bool) {
            if !acknowledged { failed.store(true, ordering: .relaxed) }
            // The last report decides; the atomic's ordering makes every earlier `failed` store visible.
            if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                completion(!failed.load(ordering: .relaxed))
            }
        }
    }

    private func attempt(_ record: OutgoingRecord, of event: Publication) {
        guard !stopped.load(ordering: .acquiring), !failure.isSet else {
            event.recordDone(acknowledged: false)
            return
        }
        if waiting.wrappingAdd(1, ordering: .relaxed).oldValue == 0 {
            progress.store(Self.monotonicNanoseconds(), ordering: .relaxed)
        }
        do {
            try producer.produce(topic: record.topic, key: record.key, value: record.value, headers: record.headers) { report in
                self.waiting.wrappingSubtract(1, ordering: .relaxed)
                switch report {
                case .success(let report):
                    self.progress.store(Self.monotonicNanoseconds(), ordering: .relaxed)
                    self.logger.trace("record acknowledged", metadata: [
                        "topic": "\(report.topic)", "partition": "\(report.partition)", "offset": "\(report.offset)",
                        "key": "\(record.key.map { String(decoding: $0, as: UTF8.self) } ?? "")",
                    ])
                    event.recordDone(acknowledged: true)
                case .failure(let error):
                    self.refused(record, of: event, error)
                }
            }
        } catch {
            waiting.wrappingSubtract(1, ordering: .relaxed)
            refused(record, of: event, error)
        }
    }

    /// Kafka refused `record` (at once, or in its delivery report): retry, replace, or give up.
    private func refused(_ record: OutgoingRecord, of event: Publication, _ error: KafkaError) {
        metrics.publishFailures.increment()
        switch error.sendFailure {
        case .closed:
            event.recordDone(acknowledged: false)
        case .fatal:
            failure.set("Kafka producer fatal error, results can no longer be published: \(error)")
            event.recordDone(acknowledged: false)
        case .recordRejected:
            guard let fallback = record.fallback else {
                failure.set("Kafka refuses even the smallest form of a record for \(record.topic) (check the topic's configuration): \(error)")
                event.recordDone(acknowledged: false)
                return
            }
            logger.error("Kafka refused a record for good; publishing its smaller form instead", metadata: [
                "topic": "\(record.topic)", "error": "\(error)",
            ])
            metrics.recordsReplaced.increment()
            attempt(fallback(), of: event)
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
