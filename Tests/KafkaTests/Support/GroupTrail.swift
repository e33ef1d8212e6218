import Foundation
import Kafka
import Logging
import TestSupport

/// librdkafka's consumer-group debug log (`debug=cgrp`) for one test, kept in memory and shown only when the
/// test fails: a group that takes too long to assign partitions must say what the member and the coordinator
/// were doing (joining, syncing, waiting on a rebalance delay, retrying a coordinator that moved).
final class GroupTrail: Sendable {
    private let recorder = LogRecorder()

    /// Warnings and worse on stderr as usual; every line, librdkafka's debug lines included, in the trail.
    func logger(_ label: String) -> Logger {
        // No `logLevel` set on the logger: on a multiplex handler it would set every handler's level, and
        // stderr would print the debug lines. The multiplex passes a line to each handler at its own level.
        Logger(label: label) { [recorder] label in
            var stderr = StreamLogHandler.standardError(label: label)
            stderr.logLevel = .warning
            return MultiplexLogHandler([stderr, recorder.logger(label: label).handler])
        }
    }

    /// Turns on librdkafka's consumer-group debug lines for a consumer logging to ``logger(_:)``.
    func configure(_ configuration: inout KafkaConsumerConfiguration) {
        configuration.additionalProperties["debug"] = "cgrp"
    }

    /// Runs `body`; when it throws, the error carries the trail's last lines.
    func explaining<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            let tail = recorder.records.entries.suffix(150).map { record in
                "\(record.label) \(record.level) [\(record.metadata["kafka.facility"].map { "\($0)" } ?? "-")] \(record.message)"
            }
            throw TestFailure("\(error)\n--- consumer-group log, last \(tail.count) lines ---\n\(tail.joined(separator: "\n"))")
        }
    }
}
