import Logging

/// Keeps what a `Logger` logs, to read back or wait for.
package final class LogRecorder: Sendable {
    package struct Record: Sendable {
        package var level: Logger.Level
        package var message: String
        /// The logging module (or the `source` the caller passed, e.g. `librdkafka`).
        package var source: String
        /// The logger's label and the line's metadata (librdkafka's facility is `kafka.facility`).
        package var label: String
        package var metadata: Logger.Metadata
    }

    package let records = EventRecorder<Record>()

    package init() {}

    /// A logger whose every line (from `trace` up) lands here.
    package func logger(label: String = "recorded") -> Logger {
        Logger(label: label) { label in Handler(recorder: self, label: label) }
    }

    /// The messages logged at `level`.
    package func lines(_ level: Logger.Level) -> [String] {
        records.entries.filter { $0.level == level }.map(\.message)
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        let label: String
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.records.append(Record(
                level: event.level, message: "\(event.message)", source: event.source, label: label,
                metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
        }
    }
}
