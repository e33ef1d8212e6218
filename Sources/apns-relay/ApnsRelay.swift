import ArgumentParser
import Foundation
import RelayApp
import ServiceSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `apns-relay`: the service and its tools.
@main
struct ApnsRelay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-relay",
        abstract: "Relays notification events from Kafka to Apple Push Notification service, at least once.",
        // The product's version first (the chart's appVersion), then the C libraries it runs with.
        version: LinkedLibraries.versionText,
        subcommands: [RunCommand.self, CheckCommand.self, SendCommand.self, ChannelsCommand.self, ReplayCommand.self, ValidateCommand.self, TopicsCommand.self]
    )

    /// ArgumentParser's entry point, except that the process ends with `_exit`: `exit` would run the C
    /// libraries' exit handlers (OpenSSL's clean-up among them) while a librdkafka thread may still be running
    /// (a client released at the end, destroyed on its poll thread; a background consumer close), which
    /// crashed a relay whose start Kafka had refused. Output is flushed first; nothing else is pending then.
    static func main() async {
        let status: Int32
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            status = ExitCode.success.rawValue
        } catch {
            let code = exitCode(for: error)
            let text = fullMessage(for: error)
            if !text.isEmpty {
                if code == .success { print(text) } else { FileHandle.standardError.write(Data((text + "\n").utf8)) }
            }
            status = code.rawValue
        }
        fflush(nil)
        _exit(status)
    }
}
