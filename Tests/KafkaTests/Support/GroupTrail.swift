import Foundation
import Kafka
import Logging
import Synchronization
import TestSupport

/// librdkafka's consumer-group debug log (`debug=cgrp`) for one test, kept in memory and shown only when the
/// test fails: a group that takes too long to assign partitions must say what the member and the coordinator
/// were doing (joining, syncing, waiting on a rebalance delay, retrying a coordinator that moved).
final class GroupTrail: Sendable {
    private let lines = Mutex<[String]>([])
    private static let capacity = 4000

    /// Warnings and worse on stderr as usual; every line, librdkafka's debug lines included, in the trail.
    func logger(_ label: String) -> Logger {
        var logger = Logger(label: label) { [self] label in
            var stderr = StreamLogHandler.standardError(label: label)
            stderr.logLevel = .warning
            return MultiplexLogHandler([stderr, Handler(label: label, trail: self)])
        }
        logger.logLevel = .debug
        return logger
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
            let tail = lines.withLock { $0.suffix(150) }
            throw TestFailure("\(error)\n--- consumer-group log, last \(tail.count) lines ---\n\(tail.joined(separator: "\n"))")
        }
    }

    fileprivate func append(_ line: String) {
        lines.withLock { lines in
            if lines.count == Self.capacity { lines.removeFirst(Self.capacity / 4) }
            lines.append(line)
        }
    }

    private struct Handler: LogHandler {
        let label: String
        let trail: GroupTrail
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let facility = event.metadata?["kafka.facility"].map { " [\($0)]" } ?? ""
            let time = String(format: "%.3f", Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 1000))
            trail.append("\(time) \(label) \(event.level)\(facility) \(event.message)")
        }
    }
}
