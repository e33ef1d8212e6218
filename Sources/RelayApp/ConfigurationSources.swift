import Configuration
import Foundation
import Relay
import SystemPackage

/// The layered sources of a relay configuration, in increasing precedence: a file (YAML or JSON), the
/// `APNS_RELAY_*` environment variables, and overrides (`--set key=value`).
///
/// `reader` answers lookups across the layers; the raw sources are kept as well, so that
/// `RelayAppConfiguration` can refuse keys nobody reads (a misspelling would otherwise be ignored) and
/// name the wrong type of a file's value.
package struct ConfigurationSources: Sendable {
    /// Variables with our prefix that belong to the project's tooling, not to the relay's configuration:
    /// tests and benchmarks set them in the environment the relay inherits.
    static let toolingVariables: Set<String> = ["BINARY", "FAULTS", "FAULTS_SEED", "FAULTS_LOG"]
    static let environmentPrefix = "APNS_RELAY_"

    package let reader: ConfigReader
    /// The parsed file, if one was given.
    package let file: ConfigurationFile?
    /// `APNS_RELAY_*` variables, prefix removed (`KAFKA_GROUP_ID`), tooling variables left out.
    package let environment: [String: String]
    /// Dotted keys as given (`kafka.groupId`).
    package let overrides: [String: String]

    /// - Parameters:
    ///   - file: a `.yaml`/`.yml` or `.json` file, or `nil`.
    ///   - environment: the process environment; only `APNS_RELAY_`-prefixed variables are read.
    ///   - overrides: `key=value` settings that beat every other source.
    /// - Throws: `RelayError` naming the file when it cannot be read or parsed.
    package init(file path: String?, environment: [String: String], overrides: [String: String]) async throws {
        let prefix = Self.environmentPrefix
        let ours = Dictionary(environment.compactMap { name, value -> (String, String)? in
            guard name.hasPrefix(prefix) else { return nil }
            let stripped = String(name.dropFirst(prefix.count))
            return Self.toolingVariables.contains(stripped) ? nil : (stripped, value)
        }, uniquingKeysWith: { $1 })
        self.environment = ours
        self.overrides = overrides

        var providers: [any ConfigProvider] = []
        if !overrides.isEmpty {
            let encoded = Dictionary(overrides.map { (RelayAppConfiguration.environmentName(forKey: $0.key), $0.value) }, uniquingKeysWith: { $1 })
            providers.append(EnvironmentVariablesProvider(environmentVariables: encoded))
        }
        providers.append(EnvironmentVariablesProvider(environmentVariables: ours))
        if let path {
            let file = try ConfigurationFile(path: path)
            self.file = file
            // An empty file has nothing to read (and swift-configuration refuses a YAML file with no mapping).
            if !file.values.isEmpty {
                do {
                    if path.hasSuffix(".json") {
                        providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(path)))
                    } else {
                        providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(path)))
                    }
                } catch {
                    // The file parsed above; if swift-configuration still refuses it, its error may quote the file.
                    let problem = path.hasSuffix(".json")
                        ? ConfigurationFile.jsonProblem(error, data: FileManager.default.contents(atPath: path))
                        : ConfigurationFile.yamlProblem(error)
                    throw RelayError("cannot read configuration file '\(path)': \(problem)")
                }
            }
        } else {
            self.file = nil
        }
        reader = ConfigReader(providers: providers)
    }
}
