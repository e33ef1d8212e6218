import Foundation
import ServiceSupport
import TestSupport
import Testing

/// `apns-relay validate` and `apns-relay run`'s start-up checks, run as a user runs them.
@Suite struct CommandLineTests {
    /// `apns-relay` with `arguments`: its exit status and everything it printed.
    private func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
        let result = try await runProcess(try RelayProcess.binary().path, arguments, environment: environment)
        return (result.status, result.stdout + result.stderr)
    }

    private func examples(_ kind: String) -> [String] {
        Checkout.examples("notification-event", kind).map { Checkout.root.appendingPathComponent("Schemas/examples/\($0.name)").path }
    }

    /// `--version` on every executable prints the product version, which the chart's appVersion (the image tag
    /// it deploys by default) repeats; the relay's adds the C libraries it runs with, a line each.
    @Test func versionIsPrintedByEveryExecutableAndMatchesTheChart() async throws {
        let (status, output) = try await run(["--version"])
        #expect(status == 0, "\(output)")
        let lines = output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").map(String.init)
        #expect(lines.first == ProductVersion.string, "\(output)")
        // Versions as the libraries spell them: digits and dots first (OpenSSL adds its release date).
        for (index, name) in ["librdkafka", "nghttp2", "OpenSSL"].enumerated() {
            let line = lines.count > index + 1 ? lines[index + 1] : ""
            #expect(line.range(of: "^\(name) [0-9]+\\.[0-9]+\\.[0-9]+", options: .regularExpression) != nil, "\(output)")
        }
        for name in ["apns-mock", "apns-relay-sandbox"] {
            let tool = try RelayProcess.binary().deletingLastPathComponent().appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: tool.path) {
                let version = try await runProcess(tool.path, ["--version"], check: true)
                #expect(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == ProductVersion.string, "\(name)")
            } else {
                Issue.record("\(name) is not built next to apns-relay (\(tool.path))")
            }
        }
        let chart = try String(contentsOf: Checkout.root.appendingPathComponent("helm/apns-relay/Chart.yaml"), encoding: .utf8)
        #expect(chart.contains("appVersion: \"\(ProductVersion.string)\""), "Chart.yaml's appVersion is the product version")
    }

    /// `apns-relay-sandbox demo` (what `make demo` runs): says what it waits for, compares expected and got per
    /// outcome, ends with PASS, and says when its rate is a debug build's.
    @Test func demoReportsExpectedAgainstGotAndPasses() async throws {
        let result = try await runProcess(try BuiltProducts.executable("apns-relay-sandbox").path, ["demo", "--events", "300"], timeout: .seconds(240))
        let output = result.stdout
        #expect(result.status == 0, "\(output)\n\(result.stderr.suffix(3000))")
        #expect(output.contains("joining consumer group"), "\(output)")
        #expect(output.contains("outcome        expected  got"), "\(output)")
        #expect(!output.contains("<- differs"), "\(output)")
        #expect(output.contains("PASS: every one of the 300 bulk and 10 urgent events"), "\(output)")
        #expect(output.contains("urgent lane: 10 sign-in codes"), "the urgent lane's line: \(output)")
        #expect(output.components(separatedBy: "] 0/300\n").count <= 2, "no repeated empty progress while the group joins: \(output)")
        #if DEBUG
        #expect(output.contains("a debug build"), "\(output)")
        #endif
    }

    @Test func validateAcceptsTheSchemasExamples() async throws {
        let files = examples("valid")
        try #require(!files.isEmpty)
        let (status, output) = try await run(["validate"] + files)
        #expect(status == 0, "\(output)")
        #expect(output.contains("\(files.count) valid, 0 invalid"), "\(output)")
    }

    @Test func validateRefusesEveryCounterExampleAndSaysWhere() async throws {
        let files = examples("invalid")
        try #require(!files.isEmpty)
        let (status, output) = try await run(["validate"] + files)
        #expect(status == 1)
        #expect(output.contains("0 valid, \(files.count) invalid"), "\(output)")
        #expect(output.contains("/deviceToken") || output.contains("/pushType"), "errors name a JSON pointer: \(output)")
    }

    @Test func runRefusesABadSettingWithTheKeyNamed() async throws {
        let (status, output) = try await run(["run"], environment: [
            "APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS": "lots",
            "APNS_RELAY_APNS_TOKEN_KEY_ID": "ABC123DEFG", "APNS_RELAY_APNS_TOKEN_TEAM_ID": "DEF123GHIJ",
            "APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": "/k.p8",
        ])
        #expect(status != 0)
        #expect(output.contains("relay.maxInFlightEvents"), "\(output)")
    }

    @Test func runRefusesAMissingKeyFileClearly() async throws {
        let (status, output) = try await run(["run"], environment: [
            "APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "APNS_RELAY_APNS_TOKEN_KEY_ID": "ABC123DEFG",
            "APNS_RELAY_APNS_TOKEN_TEAM_ID": "DEF123GHIJ", "APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": "/nonexistent/key.p8",
            "APNS_RELAY_ADMIN_PORT": "0",
        ])
        #expect(status != 0)
        #expect(output.contains("/nonexistent/key.p8"), "\(output)")
    }

    // MARK: Start-up checks come before any Kafka client

    /// Settings that would start a relay (a real signing key; a broker nobody listens on), plus `extra`.
    private func startable(_ directory: String, _ extra: [String: String]) async throws -> [String: String] {
        let keyFile = directory + "/AuthKey.p8"
        try await runProcess("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyFile], check: true)
        return [
            "APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "APNS_RELAY_APNS_TOKEN_KEY_ID": "ABC123DEFG",
            "APNS_RELAY_APNS_TOKEN_TEAM_ID": "DEF123GHIJ", "APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": keyFile,
            "APNS_RELAY_ADMIN_PORT": "0", "APNS_RELAY_LOG_LEVEL": "debug", "APNS_RELAY_LOG_FORMAT": "text",
        ].merging(extra) { $1 }
    }

    private func withDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-start-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try await body(directory)
    }

    /// Runs `apns-relay run`, expects a prompt failure that says `message`, and nothing from Kafka or the relay.
    private func expectQuietFailure(_ environment: [String: String], saying message: String) async throws {
        let relay = try RelayProcess(environment: environment)
        let status = await relay.exit(within: .seconds(15))
        let log = relay.log
        #expect(status != nil, "the relay did not exit within 15 s; log:\n\(log.suffix(3000))")
        #expect(status != 0, "log:\n\(log.suffix(3000))")
        #expect(log.contains(message), "the error names its file, key or port; log:\n\(log.suffix(3000))")
        #expect(!log.contains("librdkafka") && !log.contains("kafka.facility"), "no Kafka client was created; log:\n\(log.suffix(3000))")
        #expect(!log.contains("released without close()"), "log:\n\(log.suffix(3000))")
        #expect(!log.contains("relay started"), "log:\n\(log.suffix(3000))")
    }

    @Test func anAdminPortInUseFailsTheStartNamingThePort() async throws {
        let listener = try ListeningSocket()
        defer { listener.close() }
        try await withDirectory { directory in
            try await expectQuietFailure(
                try await startable(directory, ["APNS_RELAY_ADMIN_HOST": "127.0.0.1", "APNS_RELAY_ADMIN_PORT": String(listener.port)]),
                saying: "admin port \(listener.port) on 127.0.0.1 is in use (admin.port)"
            )
        }
    }

    @Test func anUnparsableSigningKeyFailsTheStartNamingFileAndKey() async throws {
        try await withDirectory { directory in
            let badKey = directory + "/bad.p8"
            try "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n".write(toFile: badKey, atomically: true, encoding: .utf8)
            try await expectQuietFailure(
                try await startable(directory, ["APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": badKey]),
                saying: "cannot parse the APNs signing key '\(badKey)' (apns.token.privateKeyFile, key id ABC123DEFG)"
            )
        }
    }

    @Test func aSigningKeyThatIsNoPEMSaysWhatAP8LooksLike() async throws {
        try await withDirectory { directory in
            let badKey = directory + "/not-pem.p8"
            try "MIGTAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBHkwdwIBAQQg\n".write(toFile: badKey, atomically: true, encoding: .utf8)
            try await expectQuietFailure(
                try await startable(directory, ["APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": badKey]),
                saying: "(apns.token.privateKeyFile, key id ABC123DEFG): not a PEM private key: it holds no PEM block; an APNs .p8 key starts with -----BEGIN PRIVATE KEY-----"
            )
        }
    }

    @Test func brokenYAMLNamesTheFileAndTheLine() async throws {
        try await withDirectory { directory in
            let file = directory + "/relay.yaml"
            try "kafka:\n  bootstrapServers: [a\n  x: : y\n".write(toFile: file, atomically: true, encoding: .utf8)
            let (status, output) = try await run(["run", "--config", file])
            #expect(status != 0)
            #expect(output.contains("configuration file '\(file)' is not valid YAML: 3:"), "\(output)")
        }
    }

    @Test func validateSaysWhatIsAllowedInTheUsersTerms() async throws {
        try await withDirectory { directory in
            let token = String(repeating: "ab", count: 32)
            let file = directory + "/event.json"
            try #"{"id":"x","deviceToken":"\#(token)","topic":"com.x","pushType":"alertt","priority":"high","payload":{"aps":{}},"extra":1}"#
                .write(toFile: file, atomically: true, encoding: .utf8)
            let (status, output) = try await run(["validate", file])
            #expect(status == 1, "\(output)")
            #expect(output.contains("/pushType: must be one of \"alert\", \"background\""), "enum: the allowed values: \(output)")
            #expect(output.contains("(it is \"alertt\")"), "\(output)")
            #expect(output.contains("/priority: must be an integer, not a string"), "type: expected and actual: \(output)")
            #expect(output.contains("/extra: unknown member \"extra\""), "an unknown member at its own pointer: \(output)")
            #expect(!output.contains("/pushType: /pushType"), "each pointer once: \(output)")
            for wording in ["enum values", "'type' constraint", "additionalProperties", "could not be validated"] {
                #expect(!output.contains(wording), "valijson's wording \(wording) reaches the user: \(output)")
            }
        }
    }

    @Test func validateSaysWhyAFileCannotBeRead() async throws {
        try await withDirectory { directory in
            let (status, output) = try await run(["validate", directory + "/missing.json", directory])
            #expect(status == 2, "\(output)")
            #expect(output.contains("missing.json: cannot read: no such file"), "\(output)")
            #expect(output.contains("\(directory): cannot read: it is a directory"), "\(output)")
            #expect(output.contains("0 valid, 0 invalid, 2 unreadable"), "\(output)")
            #expect(!output.contains("Usage:"), "a file problem is not a usage problem: \(output)")
        }
    }

    @Test func aMissingCAFileFailsTheStartNamingFileAndKey() async throws {
        try await withDirectory { directory in
            try await expectQuietFailure(
                try await startable(directory, ["APNS_RELAY_APNS_CA_FILE": directory + "/missing-ca.pem"]),
                saying: "the CA file '\(directory)/missing-ca.pem' (apns.caFile) does not exist or cannot be read"
            )
        }
    }

    @Test func anUnknownVariableFailsTheStartWithASuggestion() async throws {
        try await withDirectory { directory in
            var environment = try await startable(directory, [:])
            environment["APNS_RELAY_KAFKA_BOOTSTRAP_SERVER"] = environment.removeValue(forKey: "APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS")
            try await expectQuietFailure(environment, saying: "did you mean APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS (kafka.bootstrapServers)?")
        }
    }
}

/// A TCP listener on 127.0.0.1 that holds its port until closed (another process then finds it in use).
final class ListeningSocket: Sendable {
    let descriptor: Int32
    let port: Int

    init() throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let descriptor = self.descriptor
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                guard bind(descriptor, $0, length) == 0, listen(descriptor, 1) == 0, getsockname(descriptor, $0, &length) == 0 else {
                    throw TestFailure("cannot listen on 127.0.0.1")
                }
            }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(descriptor) }
}
