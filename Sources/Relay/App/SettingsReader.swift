import Configuration
import Foundation

/// A strict view of a `ConfigReader`: a missing key takes its default, but a present key whose value has
/// the wrong type is an error that names the key — never a silent fallback to the default.
struct SettingsReader {
    let reader: ConfigReader

    /// A configuration value that is present but unusable.
    struct Invalid: Error, CustomStringConvertible {
        let key: String
        let problem: String
        var description: String { "configuration key '\(key)': \(problem)" }
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

    func int(_ key: String, default value: Int, range: ClosedRange<Int>? = nil) throws -> Int {
        guard present(key) else { return value }
        guard let number = reader.int(forKey: ConfigKey(key)) else {
            throw Invalid(key: key, problem: "'\(reader.string(forKey: ConfigKey(key)) ?? "?")' is not an integer")
        }
        if let range, !range.contains(number) {
            throw Invalid(key: key, problem: "\(number) is outside \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }

    func milliseconds(_ key: String, default value: Duration, range: ClosedRange<Int> = 0...86_400_000) throws -> Duration {
        let defaultMilliseconds = Int(value.components.seconds * 1000 + value.components.attoseconds / 1_000_000_000_000_000)
        return .milliseconds(try int(key, default: defaultMilliseconds, range: range))
    }

    func bool(_ key: String, default value: Bool) throws -> Bool {
        guard present(key) else { return value }
        guard let flag = reader.bool(forKey: ConfigKey(key)) else {
            throw Invalid(key: key, problem: "'\(reader.string(forKey: ConfigKey(key)) ?? "?")' is not true or false")
        }
        return flag
    }

    /// A list, written in files as a list and in the environment or flags as comma-separated text.
    func list(_ key: String, default value: [String]) -> [String] {
        let items = reader.stringArray(forKey: ConfigKey(key)) ?? reader.string(forKey: ConfigKey(key)).map { [$0] } ?? value
        return items.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `name=value` pairs (librdkafka properties), from a list.
    func properties(_ key: String) throws -> [String: String] {
        var properties: [String: String] = [:]
        for item in list(key, default: []) {
            guard let equals = item.firstIndex(of: "="), equals != item.startIndex else {
                throw Invalid(key: key, problem: "'\(item)' is not name=value")
            }
            properties[String(item[..<equals])] = String(item[item.index(after: equals)...])
        }
        return properties
    }

    func oneOf<T>(_ key: String, default value: T, _ choices: [String: T]) throws -> T {
        guard let text = reader.string(forKey: ConfigKey(key)) else { return value }
        guard let choice = choices[text] else {
            throw Invalid(key: key, problem: "'\(text)' is not one of \(choices.keys.sorted().joined(separator: ", "))")
        }
        return choice
    }
}
