import Foundation
import RelayApp
import Testing
import Yams

/// The defaults are written once, in the configuration types; README.md's table and the chart's
/// values.yaml repeat them for readers, and these tests keep the copies true.
@Suite struct DocumentedDefaultsTests {
    /// Every key the relay reads with a default, and that default as text, from a minimal configuration.
    private func codeDefaults() async throws -> [String: String] {
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [
            "APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "broker:9092",
            "APNS_RELAY_APNS_TOKEN_KEY_ID": "ABC123DEFG", "APNS_RELAY_APNS_TOKEN_TEAM_ID": "DEF123GHIJ",
            "APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": "/secrets/AuthKey.p8",
        ], overrides: [:])
        let defaults = try RelayAppConfiguration(reader: reader).defaults
        #expect(defaults.count > 30, "the reader records the defaults it reads with")
        return defaults
    }

    /// README.md's configuration table: key → default, for rows that name one. A cell may list several
    /// keys (`a`, `b` or `a.host` / `.port`) and as many defaults.
    private func readmeDefaults() throws -> (defaults: [String: String], keys: Set<String>) {
        let readme = try String(contentsOf: Checkout.root.appendingPathComponent("README.md"), encoding: .utf8)
        var defaults: [String: String] = [:]
        var keys: Set<String> = []
        var inTable = false
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("| key | default |") { inTable = true; continue }
            guard inTable else { continue }
            guard line.hasPrefix("|") else { if !keys.isEmpty { break } else { continue } }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3, cells[1].hasPrefix("`") else { continue }
            func split(_ cell: String) -> [String] {
                cell.components(separatedBy: CharacterSet(charactersIn: ",/")).map {
                    $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))
                }.filter { !$0.isEmpty }
            }
            var rowKeys: [String] = []
            for key in split(cells[1]) {
                if key.hasPrefix("."), let previous = rowKeys.last {
                    rowKeys.append(previous.split(separator: ".").dropLast().joined(separator: ".") + key)
                } else {
                    rowKeys.append(key)
                }
            }
            keys.formUnion(rowKeys)
            guard cells[2].hasPrefix("`") else { continue }  // "—", "system trust store": no default
            let values = split(cells[2])
            #expect(values.count == rowKeys.count, "README row \(rowKeys): one default per key")
            for (key, value) in zip(rowKeys, values) { defaults[key] = value }
        }
        return (defaults, keys)
    }

    @Test func readmeTableMatchesTheCode() async throws {
        let code = try await codeDefaults()
        let readme = try readmeDefaults()
        #expect(readme.defaults.count > 30, "the README table was found")
        for (key, value) in readme.defaults.sorted(by: { $0.key < $1.key }) {
            #expect(code[key] != nil, "README documents \(key), which the relay does not read with a default")
            if let actual = code[key] { #expect(actual == value, "README says \(key) defaults to \(value); the code says \(actual)") }
        }
        for key in code.keys.sorted() where !readme.keys.contains(key) {
            Issue.record("\(key) (default \(code[key]!)) is missing from README.md's configuration table")
        }
    }

    @Test func chartValuesMatchTheCode() async throws {
        let code = try await codeDefaults()
        let text = try String(contentsOf: Checkout.root.appendingPathComponent("helm/apns-relay/values.yaml"), encoding: .utf8)
        let values = try #require(try Yams.load(yaml: text) as? [String: Any])
        var flattened: [String: String] = [:]
        func flatten(_ value: Any, _ path: String) {
            switch value {
            case let map as [String: Any]: for (key, child) in map { flatten(child, path.isEmpty ? key : path + "." + key) }
            case let list as [Any]: flattened[path] = list.map { "\($0)" }.joined(separator: ",")
            default: flattened[path] = "\(value)"
            }
        }
        for section in ["kafka", "apns", "relay", "admin", "log"] {
            if let value = values[section] { flatten(value, section) }
        }
        var compared = 0
        for (key, value) in flattened.sorted(by: { $0.key < $1.key }) {
            guard let expected = code[key] else { continue }  // chart-only values (Secrets, SASL wiring)
            compared += 1
            #expect(value == expected, "values.yaml sets \(key) to \(value); the relay's default is \(expected)")
        }
        #expect(compared > 20, "the chart's relay keys were found")
    }
}
