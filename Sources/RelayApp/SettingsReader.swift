import Configuration
import Foundation
import Relay

/// Every problem found in a configuration, reported together so one start-up attempt shows them all.
package struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    /// One line per problem, each naming its key.
    package var problems: [String]

    package var description: String {
        if problems.count == 1 { return problems[0] }
        return "\(problems.count) configuration problems:\n" + problems.map { "  - " + $0 }.joined(separator: "\n")
    }
}

/// A strict view of a `ConfigReader`: a missing key takes its default, but a present key whose value has
/// the wrong type is a problem that names the key — never a silent fallback to the default. Problems are
/// collected (the reader goes on with the default so later keys are checked too) and thrown together by
/// `checkNoProblems()`.
///
/// Every key asked for is recorded: what a source holds beyond those is unknown (see `+UnknownKeys`).
final class SettingsReader {
    let sources: ConfigurationSources
    var reader: ConfigReader { sources.reader }
    private(set) var problems: [String] = []
    /// Every key read or declared: the keys this configuration knows.
    private(set) var known: Set<String> = []
    /// The default of every key read with one, as text (durations in milliseconds, lists comma-separated).
    private(set) var defaults: [String: String] = [:]
    /// Keys whose value was refused (a later "is required" about them would only repeat it).
    private(set) var refused: Set<String> = []
    /// `APNS_RELAY_*` variables left unread because they are the kubelet's service links (`ServiceLinkVariable`).
    var ignoredVariables: [String] = []

    init(sources: ConfigurationSources) { self.sources = sources }

    /// Records a problem that is not about one value's type or range (a missing or contradictory setting).
    func problem(_ message: String) { problems.append(message) }

    /// Marks keys as known without reading them (keys that only matter in another mode, e.g. the
    /// certificate keys under token authentication).
    func declare(_ keys: [String]) { known.formUnion(keys) }

    func wasRefused(_ key: String) -> Bool { refused.contains(key) }

    /// - Throws: `ConfigurationError` listing every problem recorded.
    func checkNoProblems() throws {
        if !problems.isEmpty { throw ConfigurationError(problems: problems) }
    }

    func invalid(_ key: String, _ problem: String) {
        refused.insert(key)
        let name = RelayAppConfiguration.environmentName(forKey: key)
        let variable = ConfigurationSources.environmentPrefix + name
        var message = "configuration key '\(key)' (\(variable)): \(problem)"
        // A Service whose name makes its service link a real key's variable (`apns-relay-admin` → ADMIN_PORT).
        if sources.overrides[key] == nil, let value = sources.environment[name],
           let link = ServiceLinkVariable(name: variable, value: value) {
            let service = link.service.lowercased().replacingOccurrences(of: "_", with: "-")
            message += " — this is the kubelet's service-link variable of a Service named '\(service)'; set enableServiceLinks: false in the pod spec (the chart does) or rename that Service"
        }
        problems.append(message)
    }

    /// Whether `key` was given (by any source), rather than left to its default.
    func isSet(_ key: String) -> Bool { present(key) }

    private func present(_ key: String) -> Bool {
        reader.string(forKey: ConfigKey(key)) != nil || reader.stringArray(forKey: ConfigKey(key)) != nil
    }

    enum Expected {
        case text, integer, decimal, flag, list

        var description: String {
            switch self {
            case .text: "a string"
            case .integer: "an integer"
            case .decimal: "a number"
            case .flag: "true or false"
            case .list: "a string or a list of strings"
            }
        }
    }

    /// Records `key` as known and checks the type of the file's value for it, if the file has one.
    /// Strict as the file parsers are: a quoted `"9090"` is a string, not a port.
    /// - Returns: `false` when the file's value has the wrong type (the problem is recorded).
    @discardableResult
    func check(_ key: String, _ expected: Expected) -> Bool {
        known.insert(key)
        guard let file = sources.file, let value = file.values[key] else { return true }
        let fits: Bool
        switch (expected, value) {
        case (.text, .string): fits = true
        case (.integer, .integer): fits = true
        case (.decimal, .integer), (.decimal, .number): fits = true
        case (.flag, .bool): fits = true
        case (.list, .string): fits = true
        case (.list, .list(let items)):
            if let odd = items.first(where: { if case .string = $0 { false } else { true } }) {
                invalid(key, "expected a list of strings, got \(odd.description) in the list (in \(file.path))")
                return false
            }
            fits = true
        default: fits = false
        }
        if !fits { invalid(key, "expected \(expected.description), got \(value.description) (in \(file.path))") }
        return fits
    }

    func string(_ key: String, default value: String) -> String {
        defaults[key] = value
        guard check(key, .text) else { return value }
        return reader.string(forKey: ConfigKey(key)) ?? value
    }

    func string(_ key: String) -> String? {
        guard check(key, .text) else { return nil }
        return reader.string(forKey: ConfigKey(key))
    }

    func int(_ key: String, default value: Int, range: ClosedRange<Int>? = nil) -> Int {
        defaults[key] = String(value)
        guard check(key, .integer), present(key) else { return value }
        guard let number = reader.int(forKey: ConfigKey(key)) else {
            invalid(key, "'\(reader.string(forKey: ConfigKey(key)) ?? "?")' is not an integer")
            return value
        }
        if let range, !range.contains(number) {
            invalid(key, "\(number) is outside \(range.lowerBound)...\(range.upperBound)")
            return value
        }
        return number
    }

    /// A number with a fraction (`0.01`); an integer is one too.
    func double(_ key: String, default value: Double, range: ClosedRange<Double>) -> Double {
        defaults[key] = String(value)
        guard check(key, .decimal), present(key) else { return value }
        let text = reader.string(forKey: ConfigKey(key))
        guard let number = reader.double(forKey: ConfigKey(key)) ?? text.flatMap(Double.init), number.isFinite else {
            invalid(key, "'\(text ?? "?")' is not a number")
            return value
        }
        guard range.contains(number) else {
            invalid(key, "\(number) is outside \(range.lowerBound)...\(range.upperBound)")
            return value
        }
        return number
    }

    func milliseconds(_ key: String, default value: Duration, range: ClosedRange<Int> = 0...86_400_000) -> Duration {
        let defaultMilliseconds = Int(value.components.seconds * 1000 + value.components.attoseconds / 1_000_000_000_000_000)
        return .milliseconds(int(key, default: defaultMilliseconds, range: range))
    }

    func bool(_ key: String, default value: Bool) -> Bool {
        defaults[key] = String(value)
        guard check(key, .flag), present(key) else { return value }
        guard let flag = reader.bool(forKey: ConfigKey(key)) else {
            invalid(key, "'\(reader.string(forKey: ConfigKey(key)) ?? "?")' is not true or false")
            return value
        }
        return flag
    }

    /// A list, written in files as a list and in the environment or flags as comma-separated text.
    func list(_ key: String, default value: [String]) -> [String] {
        defaults[key] = value.joined(separator: ",")
        guard check(key, .list) else { return value }
        let items = reader.stringArray(forKey: ConfigKey(key)) ?? reader.string(forKey: ConfigKey(key)).map { [$0] } ?? value
        return items.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// librdkafka properties (`name` → `value`), kept whole: a value may hold commas (`debug=cgrp,topic`, a
    /// cipher list, a password). In a file, a mapping (`properties: {debug: "cgrp,topic"}`) or a list of
    /// `name=value` items, each item whole; in the environment and after `--set`, one text of `name=value`
    /// entries separated by commas, a comma inside a value written `\,` (and a backslash `\\`).
    /// An entry that is not `name=value` is a problem naming its position only: it may hold a secret.
    func properties(_ key: String) -> [String: String] {
        known.insert(key)
        let variable = RelayAppConfiguration.environmentName(forKey: key)
        var entries: [String]
        if let text = sources.overrides[key] ?? sources.environment[variable] {
            entries = Self.splitEscaped(text)
        } else if let file = sources.file, let value = file.values[key] {
            switch value {
            case .mapping:
                var properties: [String: String] = [:]
                for (path, child) in file.values where path.hasPrefix(key + ".") {
                    let name = String(path.dropFirst(key.count + 1))
                    known.insert(path)
                    switch child {
                    case .string(let text): properties[name] = text
                    case .integer(let number): properties[name] = String(number)
                    case .number(let number): properties[name] = String(number)
                    case .bool(let flag): properties[name] = String(flag)
                    case .mapping: continue  // a dotted name written nested (`sasl: {mechanism: …}`): its leaves follow
                    case .null, .list: invalid(key, "property '\(name)' needs a single value (in \(file.path))")
                    }
                }
                return properties
            case .list(let items):
                entries = []
                for (index, item) in items.enumerated() {
                    guard case .string(let text) = item else {
                        invalid(key, "entry \(index + 1) of the list is not a string (in \(file.path))")
                        continue
                    }
                    entries.append(text)
                }
            case .string(let text):
                entries = Self.splitEscaped(text)
            default:
                invalid(key, "expected a mapping of librdkafka properties, or a list of name=value, got \(value.description) (in \(file.path))")
                return [:]
            }
        } else {
            return [:]
        }
        var properties: [String: String] = [:]
        for (index, entry) in entries.enumerated() {
            let trimmed = entry.drop { $0 == " " }
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "="), equals != trimmed.startIndex else {
                invalid(key, "entry \(index + 1) is not name=value (its text is not shown: it may hold a secret)")
                continue
            }
            properties[String(trimmed[..<equals]).trimmingCharacters(in: .whitespaces)] = String(trimmed[trimmed.index(after: equals)...])
        }
        return properties
    }

    /// `a=1,b=x\,y` → `["a=1", "b=x,y"]`: commas separate, `\,` is a comma and `\\` a backslash.
    static func splitEscaped(_ text: String) -> [String] {
        var entries: [String] = []
        var current = ""
        var escaped = false
        for character in text {
            if escaped {
                if character != "," && character != "\\" { current.append("\\") }
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "," {
                entries.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        if escaped { current.append("\\") }
        entries.append(current)
        return entries
    }

    func oneOf<T>(_ key: String, default value: T, _ choices: [String: T]) -> T {
        let name = String(describing: value)
        defaults[key] = choices.first { String(describing: $0.value) == name }?.key ?? name
        guard check(key, .text), let text = reader.string(forKey: ConfigKey(key)) else { return value }
        guard let choice = choices[text] else {
            invalid(key, "'\(text)' is not one of \(choices.keys.sorted().joined(separator: ", "))")
            return value
        }
        return choice
    }
}
