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

    /// - Returns: `true` once all are acknowledged by Kafka; `false` when the relay gives the event up
    ///   (shutdown, failure), whose offset is then never stored.
    func publish(_ records: [OutgoingRecord]) async -> Bool {
        if records.count == 1 { return await publish(records[0]) }
        return await withTaskGroup(of: Bool.self) { group in
            for record in records {
                group.addTask { await self.publish(record) }
            }
            return await group.allSatisfy { $0 }
        }
    }

    private func publish(_ original: OutgoingRecord) async -> Bool {
        var record = original
        while !Task.isCancelled, !failure.isSet {
            let error: KafkaError
            if waiting.wrappingAdd(1, ordering: .relaxed).oldValue == 0 {
                progress.store(Self.monotonicNanoseconds(), ordering: .relaxed)
            }
            defer { waiting.wrappingSubtract(1, ordering: .relaxed) }
            do {
                _ = try await producer.send(topic: record.topic, key: record.key, value: record.value, headers: record.headers)
                progress.store(Self.monotonicNanoseconds(), ordering: .relaxed)
                return true
            } catch let failed as KafkaError {
                error = failed
            } catch {
                failure.set("unexpected error publishing to \(record.topic): \(error)")
                return false
            }
            metrics.publishFailures.increment()
            switch error.sendFailure {
            case .closed:
                return false
            case .fatal:
                failure.set("Kafka producer fatal error, results can no longer be published: \(error)")
                return false
            case .recordRejected:
                guard let fallback = record.fallback else {
                    failure.set("Kafka refuses even the smallest form of a record for \(record.topic) (check the topic's configuration): \(error)")
                    return false
                }
                logger.error("Kafka refused a record for good; publishing its smaller form instead", metadata: [
                    "topic": "\(record.topic)", "error": "\(error)",
                ])
                metrics.recordsReplaced.increment()
                record = fallback()
            case .retriable:
                logger.error("publishing a record failed; retrying", metadata: ["topic": "\(record.topic)", "error": "\(error)"])
                try? await Task.sleep(for: retryBackoff)
            }
        }
        return false
    }

    private static func monotonicNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}
