import Crypto
import Foundation
import Logging
import Relay
import RelayApp
import TestSupport
import Testing

/// What the relay says about the files that hold its secrets: it names them and what is wrong, and never
/// quotes them (a wrong path often points at the key itself; a broken line may hold a pasted password).
@Suite struct SecretFileHygieneTests {
    private static let pem = P256.Signing.PrivateKey().pemRepresentation

    private func configuration(_ overrides: [String: String]) async throws -> RelayAppConfiguration {
        var settings = ["kafka.bootstrapServers": "b:9092"]
        settings.merge(overrides) { $1 }
        return try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: settings))
    }

    @Test func aKeyIDFileHoldingTheSigningKeyIsRefusedWithoutQuotingIt() throws {
        let directory = try makeTemporaryDirectory("key-id-file-pem")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("keyId").path
        try Self.pem.write(toFile: file, atomically: true, encoding: .utf8)
        let error = try #require(throws: RelayError.self) { try RelayApp.keyID(.file(file), prefix: "apns.") }
        let size = Self.pem.utf8.count
        let body = Self.pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        #expect(error.description.contains("the APNs key id file '\(file)' (apns.token.keyIdFile)"), "\(error)")
        #expect(error.description.contains("is \(size) bytes"), "\(error)")
        #expect(error.description.contains("not a 10-character key id"), "\(error)")
        #expect(error.description.contains("holds characters other than A–Z 0–9"), "\(error)")
        #expect(!error.description.contains("BEGIN") && !error.description.contains("PRIVATE KEY"), "\(error)")
        for line in body { #expect(!error.description.contains(line), "the error quotes the key: \(error)") }
        // Even one character of the file is not shown (the old message listed the characters found).
        #expect(!error.description.contains("'-'") && !error.description.contains("'+'") && !error.description.contains("'/'"), "\(error)")
    }

    @Test func aShortKeyIDFileIsRefusedWithItsLengthNotItsText() throws {
        let directory = try makeTemporaryDirectory("key-id-file-short")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("keyId").path
        try "abc\n".write(toFile: file, atomically: true, encoding: .utf8)
        let error = try #require(throws: RelayError.self) { try RelayApp.keyID(.file(file), prefix: "apns.") }
        #expect(error.description.contains("'\(file)' (apns.token.keyIdFile)"), "\(error)")
        #expect(error.description.contains("3 characters") && error.description.contains("lowercase"), "\(error)")
        #expect(!error.description.contains("abc"), "\(error)")
        // A good one is read, trimmed.
        try "ABC123DEFG\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try RelayApp.keyID(.file(file), prefix: "apns.") == "ABC123DEFG")
    }

    @Test(arguments: [
        "kafka:\n  bootstrapServers: b:9092\n  properties:\n    sasl.password: hunter2-SECRET-x: y\n",
        "kafka:\n  bootstrapServers: b:9092\n  properties:\n    sasl.password: \"hunter2-SECRET-x\n",
        "kafka:\n  bootstrapServers: b:9092\n  properties:\n    sasl.password: [hunter2-SECRET-x\n",
        "kafka:\n  bootstrapServers: b:9092\n  properties:\n    sasl.password: hunter2-SECRET-x\n   bad: indent\n",
    ])
    func aYAMLParseErrorNamesTheLineButNeverQuotesIt(yaml: String) async throws {
        let directory = try makeTemporaryDirectory("config-parse")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("relay.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        let error = try #require(throws: RelayError.self) { try ConfigurationFile(path: file) }
        let place = "configuration file '\(file)' is not valid YAML: "
        #expect(error.description.hasPrefix(place), "\(error)")
        #expect(error.description.dropFirst(place.count).firstMatch(of: #/^[45]:\d+: [a-z]/#) != nil, "line:column: and the kind: \(error)")
        #expect(!error.description.contains("SECRET"), "the error quotes the file: \(error)")
        #expect(!error.description.contains("sasl.password"), "the error quotes the file: \(error)")
        #expect(!error.description.contains("\n"), "\(error)")
        // Through the layered sources (what `run` and `check` read) too.
        await #expect(throws: RelayError.self) { _ = try await ConfigurationSources(file: file, environment: [:], overrides: [:]) }
        do {
            _ = try await ConfigurationSources(file: file, environment: [:], overrides: [:])
        } catch {
            #expect(!"\(error)".contains("SECRET"), "\(error)")
        }
    }

    @Test(arguments: [
        ("{\n  \"kafka\": {\n    \"sasl.password\": hunter2-SECRET-x\n  }\n}", "3:22: an unexpected character where a value belongs (text without quotes?)"),
        ("{\"kafka\": {\n  \"sasl.password\": \"hunter2-SECRET-x\n\"}}", "2:37: a control character (a line break?) inside a string"),
        ("{\"kafka\": {\"sasl.password\": \"hunter2\\qSECRET\"}}", "1:38: an invalid escape sequence inside a string"),
        ("{\"kafka\": {\"sasl.password\": \"hunter2-SECRET\" \"x\": 1}}", "1:46: a missing ',' or '}' after a value"),
        ("{\"kafka\": {\"sasl.password\": \"hunter2-SECRET", "1:44: the file ends inside a string"),
    ])
    func aJSONParseErrorNamesTheLineButNeverQuotesIt(json: String, expected: String) throws {
        let directory = try makeTemporaryDirectory("config-parse-json")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("relay.json").path
        try json.write(toFile: file, atomically: true, encoding: .utf8)
        let error = try #require(throws: RelayError.self) { try ConfigurationFile(path: file) }
        #expect(error.description == "configuration file '\(file)' is not valid JSON: \(expected)")
        #expect(!error.description.contains("SECRET"), "\(error)")
    }

    /// Kubernetes mounts Secrets 0644 by default: the relay starts, and says which file and what to set.
    @Test func aSigningKeyReadableByOthersIsWarnedAboutAtStart() async throws {
        let directory = try makeTemporaryDirectory("key-mode")
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("AuthKey.p8").path
        try Self.pem.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let configuration = try await configuration([
            "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": keyFile,
        ])
        let credential = configuration.apns.credentials[0]
        func warnings(mode: Int) throws -> [String] {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: keyFile)
            let recorder = LogRecorder()
            _ = try RelayApp.clientConfiguration(configuration.apns, credential: credential, logger: recorder.logger())
            return recorder.lines(.warning)
        }
        #expect(try warnings(mode: 0o644) == [
            "the APNs signing key file '\(keyFile)' (apns.token.privateKeyFile) has mode 0644: readable by others; 0600 or 0440 is "
                + "enough (on Kubernetes, set the Secret volume's defaultMode: 0440)",
        ])
        #expect(try warnings(mode: 0o604).count == 1)
        // What the warning recommends draws no warning.
        #expect(try warnings(mode: 0o600) == [])
        #expect(try warnings(mode: 0o440) == [])
        #expect(try warnings(mode: 0o400) == [])
    }
}
