extension RelayAppConfiguration {
    /// One configuration key's effective value and where it came from.
    package struct Setting: Sendable, Hashable {
        package var key: String
        package var value: String
        /// `default`, `file <path>`, `env APNS_RELAY_…` or `--set`.
        package var source: String
    }

    /// The effective value of every key that has one, with its source, secrets redacted (librdkafka
    /// properties naming a password, secret or key; key material itself is never in the configuration, only
    /// file paths): what `apns-relay check` prints.
    package func effectiveSettings(from sources: ConfigurationSources) -> [Setting] {
        var settings: [Setting] = []
        for key in knownKeys.sorted() {
            let environmentName = Self.environmentName(forKey: key)
            var setting: Setting?
            if let value = sources.overrides[key] {
                setting = Setting(key: key, value: value, source: "--set")
            } else if let value = sources.environment[environmentName] {
                setting = Setting(key: key, value: value, source: "env \(ConfigurationSources.environmentPrefix)\(environmentName)")
            } else if let file = sources.file, let value = file.values[key], value != .mapping {
                setting = Setting(key: key, value: Self.text(of: value), source: "file \(file.path)")
            } else if let value = defaults[key] {
                setting = Setting(key: key, value: value, source: "default")
            }
            guard var setting else { continue }
            setting.value = Self.redacted(key: key, value: setting.value)
            settings.append(setting)
        }
        return settings
    }

    private static func text(of value: ConfigurationFile.Value) -> String {
        switch value {
        case .string(let text): text
        case .integer(let number): String(number)
        case .number(let number): String(number)
        case .bool(let flag): String(flag)
        case .null: "null"
        case .list(let items): items.map(text(of:)).joined(separator: ",")
        case .mapping: "(section)"
        }
    }

    /// `name=value` lists with a secret's value replaced; other values as they are.
    static func redacted(key: String, value: String) -> String {
        guard key.hasSuffix("properties") || key.hasSuffix("Properties") else { return value }
        return value.split(separator: ",", omittingEmptySubsequences: false).map { item -> String in
            guard let equals = item.firstIndex(of: "=") else { return String(item) }
            let name = item[..<equals].lowercased()
            let secret = ["password", "secret", "token", "key.pem", "keystore", "jaas"].contains { name.contains($0) }
            return secret ? "\(item[..<equals])=<redacted>" : String(item)
        }.joined(separator: ",")
    }
}
