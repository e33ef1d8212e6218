import Foundation
import RelaySandbox
import TestSupport
import Testing

/// `apns-relay send`, run as a user runs it, against the sandbox's mock APNs (no Kafka settings given).
@Suite struct SendCommandTests {
    private let token = String(repeating: "5e", count: 32)

    /// The sandbox's APNs settings only: `send` must not need Kafka.
    private func environment(_ sandbox: RelaySandbox) -> [String: String] {
        sandbox.relayEnvironment().filter { !$0.key.hasPrefix("APNS_RELAY_KAFKA_") }
    }

    private func send(_ arguments: [String], _ environment: [String: String]) async throws -> (status: Int32, output: String) {
        let result = try await runProcess(try RelayProcess.binary().path, ["send"] + arguments, environment: environment, timeout: .seconds(60))
        return (result.status, result.stdout + result.stderr)
    }

    @Test func sendsOnePushAndPrintsAPNsAnswer() async throws {
        try await withSandbox { sandbox in
            let env = environment(sandbox)
            let accepted = try await send(["--device-token", token, "--topic", "com.example.app", "--environment", "development"], env)
            #expect(accepted.status == 0, "\(accepted.output)")
            #expect(accepted.output.contains("status 200  apns-id "), "\(accepted.output)")
            #expect(accepted.output.contains(" ms (connect included)"), "\(accepted.output)")
            #expect(sandbox.apns.statistics.accepted == 1, "the mock accepted exactly this push")

            sandbox.apns.registry.unregister(token, sinceMilliseconds: 1_700_000_000_000)
            let gone = try await send(["--device-token", token, "--topic", "com.example.app", "--environment", "development"], env)
            #expect(gone.status == 1, "\(gone.output)")
            #expect(gone.output.contains("status 410  reason Unregistered  timestamp 1700000000000"), "\(gone.output)")
        }
    }

    @Test func sendsAnEventFileAndRefusesAnInvalidOne() async throws {
        try await withSandbox { sandbox in
            let env = environment(sandbox)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("send-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let good = directory.appendingPathComponent("good.json").path
            try #"{"id":"s1","deviceToken":"\#(token)","topic":"com.example.app","pushType":"background","environment":"development","payload":{"aps":{"content-available":1}}}"#
                .write(toFile: good, atomically: true, encoding: .utf8)
            let sent = try await send(["--event", good], env)
            #expect(sent.status == 0, "\(sent.output)")
            #expect(sent.output.contains("sending background push"), "\(sent.output)")

            let bad = directory.appendingPathComponent("bad.json").path
            try #"{"id":"s2","deviceToken":"xyz","topic":"com.example.app","pushType":"alert","payload":{}}"#
                .write(toFile: bad, atomically: true, encoding: .utf8)
            let refused = try await send(["--event", bad], env)
            #expect(refused.status == 2, "\(refused.output)")
            #expect(refused.output.contains("the event is not valid") && refused.output.contains("/deviceToken"), "\(refused.output)")
            #expect(sandbox.apns.statistics.requests == 1, "an invalid event is never sent")
        }
    }

    /// `apns.proxy.url` and `apns.proxy.credentialsFile`, as an operator sets them, through Debian's tinyproxy.
    @Test func sendsThroughAnHTTPProxy() async throws {
        let proxy = try await TinyProxy.start(basicAuth: (user: "relay", password: "pr0xy-pass"))
        defer { proxy.stop() }
        try await withSandbox { sandbox in
            let directory = try makeTemporaryDirectory("send-proxy")
            defer { try? FileManager.default.removeItem(at: directory) }
            let credentials = directory.appendingPathComponent("proxy-credentials").path
            try "relay:pr0xy-pass\n".write(toFile: credentials, atomically: true, encoding: .utf8)
            var env = environment(sandbox)
            env["APNS_RELAY_APNS_PROXY_URL"] = proxy.url
            env["APNS_RELAY_APNS_PROXY_CREDENTIALS_FILE"] = credentials
            let sent = try await send(["--device-token", token, "--topic", "com.example.app", "--environment", "development"], env)
            #expect(sent.status == 0, "\(sent.output)")
            #expect(sandbox.apns.statistics.accepted == 1)
            #expect(proxy.log.contains("CONNECT 127.0.0.1:"), "through the proxy: \(proxy.log)")

            try "relay:wrong\n".write(toFile: credentials, atomically: true, encoding: .utf8)
            let refused = try await send(["--device-token", token, "--topic", "com.example.app", "--environment", "development", "--timeout-ms", "30000"], env)
            #expect(refused.status == 3, "\(refused.output)")
            #expect(refused.output.contains("proxy http://127.0.0.1:\(proxy.port) (user relay) rejected the credentials"), "\(refused.output)")
            #expect(!refused.output.contains("wrong") && !refused.output.contains("pr0xy-pass"), "never prints the password: \(refused.output)")

            env["APNS_RELAY_APNS_PROXY_URL"] = "http://relay:pr0xy-pass@127.0.0.1:\(proxy.port)"
            let misconfigured = try await send(["--device-token", token, "--topic", "com.example.app"], env)
            #expect(misconfigured.status == 2, "\(misconfigured.output)")
            #expect(misconfigured.output.contains("apns.proxy.url: proxy URL <a URL with credentials> must not contain credentials"), "\(misconfigured.output)")
            #expect(!misconfigured.output.contains("pr0xy-pass"), "\(misconfigured.output)")
        }
    }

    /// `apns.token.keyIdFile`: the key id read from a file beside the key (how a rotating Secret carries it).
    @Test func readsTheKeyIDFromItsFile() async throws {
        try await withSandbox { sandbox in
            let directory = try makeTemporaryDirectory("send-key-id")
            defer { try? FileManager.default.removeItem(at: directory) }
            let keyIDFile = directory.appendingPathComponent("keyId").path
            try "\(sandbox.keyID)\n".write(toFile: keyIDFile, atomically: true, encoding: .utf8)
            var env = environment(sandbox)
            env.removeValue(forKey: "APNS_RELAY_APNS_TOKEN_KEY_ID")
            env["APNS_RELAY_APNS_TOKEN_KEY_ID_FILE"] = keyIDFile
            let sent = try await send(["--device-token", token, "--topic", "com.example.app", "--environment", "development"], env)
            #expect(sent.status == 0, "\(sent.output)")

            env["APNS_RELAY_APNS_TOKEN_KEY_ID_FILE"] = directory.appendingPathComponent("missing").path
            let missing = try await send(["--device-token", token, "--topic", "com.example.app"], env)
            #expect(missing.status == 2, "\(missing.output)")
            #expect(missing.output.contains("cannot read the APNs key id file") && missing.output.contains("apns.token.keyIdFile"), "\(missing.output)")
        }
    }

    @Test func noAnswerExitsThree() async throws {
        try await withSandbox { sandbox in
            var env = environment(sandbox)
            env["APNS_RELAY_APNS_DEVELOPMENT_PORT"] = "1"  // nothing listens there
            let result = try await send(["--device-token", token, "--topic", "com.example.app", "--environment", "development", "--timeout-ms", "3000"], env)
            #expect(result.status == 3, "\(result.output)")
            #expect(result.output.contains("no answer:"), "\(result.output)")
        }
    }
}
