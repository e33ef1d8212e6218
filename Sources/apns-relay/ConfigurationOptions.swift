import ArgumentParser
import Foundation
import RelayApp

/// The options every command that reads the relay's configuration takes: `--config` and `--set`.
struct ConfigurationOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "Configuration file (.yaml, .yml or .json).")
    var configFile: String?

    @Option(name: .customLong("set"), help: "Override one key, e.g. --set kafka.groupId=relay-b (repeatable).")
    var overrides: [String] = []

    /// `--set` items as keys and values, with `extra` (a command's shortcut flags) on top.
    func settings(adding extra: [String: String] = [:]) throws -> [String: String] {
        var settings: [String: String] = [:]
        for item in overrides {
            guard let equals = item.firstIndex(of: "="), equals != item.startIndex else {
                throw ValidationError("--set takes key=value, got '\(item)'")
            }
            settings[String(item[..<equals])] = String(item[item.index(after: equals)...])
        }
        return settings.merging(extra) { $1 }
    }

    /// The file, the process's `APNS_RELAY_*` variables and the `--set` items, as the relay reads them.
    func sources(adding extra: [String: String] = [:]) async throws -> ConfigurationSources {
        try await RelayAppConfiguration.reader(file: configFile, environment: ProcessInfo.processInfo.environment, overrides: try settings(adding: extra))
    }
}
