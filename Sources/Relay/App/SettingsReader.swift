import Configuration
import Foundation

/// Every problem found in a configuration, reported together so one start-up attempt shows them all.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    /// One line per problem, each naming its key.
    public var problems: [String]

    public var description: String {
        if problems.count == 1 { return problems[0] }
        return "\(problems.count) configuration problems:\n" + problems.map { "  - " + $0 }.joined(separator: "\n")
    }
}

/// A strict view of a `ConfigReader`: a missing key takes its default, but a present key whose value has
/// the wrong type is a problem that names the key — never a silent fallback to the default. Problems are
/// collected (the reader goes on with the default so later keys are checked too) and thrown together by
/// `checkNoProblems()`.
final class SettingsReader {
    let reader: ConfigReader
    private(set) var problems: [String] = []

    init(reader: ConfigReader) { self.reader = reader }

    /// Records a problem that is not about one value's type or range (a missing or contradictory setting).
    func problem(_ message: String) { problems.append(message) }

    /// - Throws: `ConfigurationError` listing every problem recorded.
    func checkNoProblems() throws {
        if !problems.isEmpty { throw ConfigurationError(problems: problems) }
    }

    private func invalid(_ key: String, _ problem: String) {
        problems.append("configuration key '\(key)' (APNS_RELAY_\(RelayAppConfiguration.environmentName(forKey: key))): \(problem)")
    }

    private func present(_ key: String) -> Bool {
        reader.string(forKey: ConfigKey(key)) != nil || reader.stringArray(forKey: ConfigKey(key)) != nil
    }

    func string(_ key: String, default value: String) -> String {
        reader.string(forKey: ConfigKey(key)) ?? value
    }

    func string(_ key: String) -> String? {
        reader.string(forKey: ConfigKey(key))
    }

    func int(_ key: String, default value: Int, range: ClosedRange<Int>? = nil) -> Int {
        guard present(key) else { return value }
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

    func milliseconds(_ key: String, default value: Duration, range: ClosedRange<Int> = 0...86_400_000) -> Duration {
        let defaultMilliseconds = Int(value.components.seconds * 1000 + value.components.attoseconds / 1_000_000_000_000_000)
        return .milliseconds(int(key, default: defaultMilliseconds, range: range))
    }

    func bool(_ key: String, default value: Bool) -> Bool {
        guard present(key) else { return value }
        guard let flag = reader.bool(forKey: ConfigKey(key)) else {
            invalid(key, "'\(reader.string(forKey: ConfigKey(key)) ?? "?")' is not true or false")
            return value
        }
        return flag
    }

    /// A list, written in files as a list and in the environment or flags as comma-separated text.
    func list(_ key: String, default value: [String]) -> [String] {
        let items = reader.stringArray(forKey: ConfigKey(key)) ?? reader.string(forKey: ConfigKey(key)).map { [$0] } ?? value
        return items.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `name=value` pairs (librdkafka properties), from a list.
    func properties(_ key: String) -> [String: String] {
        var properties: [String: String] = [:]
        for item in list(key, default: []) {
            guard let equals = item.firstIndex(of: "="), equals != item.startIndex else {
                invalid(key, "'\(item)' is not name=value")
                continue
            }
            properties[String(item[..<equals])] = String(item[item.index(after: equals)...])
        }
        return properties
    }

    func oneOf<T>(_ key: String, default value: T, _ choices: [String: T]) -> T {
        guard let text = reader.string(forKey: ConfigKey(key)) else { return value }
        guard let choice = choices[text] else {
            invalid(key, "'\(text)' is not one of \(choices.keys.sorted().joined(separator: ", "))")
            return value
        }
        return choice
    }
}
