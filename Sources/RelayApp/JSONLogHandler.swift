import Foundation
import Logging
import Relay
import RelayContract
import Synchronization

/// One JSON object per line, for log collectors: `timestamp`, `level`, `label`, `message`, then the
/// metadata keys (`eventId`, `partition`, `offset`, `apnsId`, `reason`, …) as strings.
///
/// Secrets never reach a logger in this code base (tokens and keys redact themselves), so this handler
/// does no filtering of its own.
package struct JSONLogHandler: LogHandler {
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .info
    package var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let output: Output

    /// Where lines go; one lock keeps lines whole when several threads log.
    final class Output: Sendable {
        private let lock = Mutex(())
        private let handle: FileHandle
        init(handle: FileHandle) { self.handle = handle }
        func write(_ line: [UInt8]) {
            lock.withLock { _ in handle.write(Data(line)) }
        }
    }

    package static func standardError(label: String) -> JSONLogHandler {
        JSONLogHandler(label: label, output: Self.stderr)
    }

    private static let stderr = Output(handle: FileHandle.standardError)

    init(label: String, output: Output) {
        self.label = label
        self.output = output
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var writer = JSONWriter(capacity: 256)
        writer.field("timestamp", Self.timestamp())
        writer.field("level", event.level.rawValue)
        writer.field("label", label)
        writer.field("message", "\(event.message)")
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        for key in merged.keys.sorted() where !["timestamp", "level", "label", "message"].contains(key) {
            writer.field(named: key, "\(merged[key]!)")
        }
        var line = writer.finish()
        line.append(UInt8(ascii: "\n"))
        output.write(line)
    }

    private static func timestamp() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var time = tm()
        var seconds = spec.tv_sec
        gmtime_r(&seconds, &time)
        let milliseconds = spec.tv_nsec / 1_000_000
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
            time.tm_year + 1900, time.tm_mon + 1, time.tm_mday, time.tm_hour, time.tm_min, time.tm_sec, milliseconds
        )
    }
}
