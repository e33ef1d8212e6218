import Foundation
import TestSupport
import Testing

/// The `apns-mock` executable: first line `listening port=… ca=…`, serves, exits 0 on SIGTERM.
@Suite struct ExecutableTests {
    /// `swift build --build-tests` builds it beside the test binary; a missing one fails the test (a skipped
    /// test reads as a passed one in a summary).
    static var executable: URL { get throws { try BuiltProducts.executable("apns-mock") } }

    @Test
    func anUnreadableOrWrongPublicKeySaysWhichOptionFileAndWhy() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mock-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = directory.appendingPathComponent("missing.p8").path
        let garbage = directory.appendingPathComponent("garbage.p8").path
        try "not a key".write(toFile: garbage, atomically: true, encoding: .utf8)
        let keyArguments = ["--key-id", "ABC123DEFG", "--team-id", "DEF123GHIJ", "--public-key"]
        let absent = try await runProcess(try Self.executable.path, keyArguments + [missing])
        #expect(absent.status != 0)
        #expect(absent.stderr.contains("cannot read --public-key '\(missing)': no such file"), "\(absent.stderr)")
        #expect(!absent.stderr.contains("permission"), "a missing file is not a permission problem: \(absent.stderr)")
        let wrong = try await runProcess(try Self.executable.path, keyArguments + [garbage])
        #expect(wrong.status != 0)
        #expect(wrong.stderr.contains("--public-key '\(garbage)' (key id ABC123DEFG) is not a PEM public key"), "\(wrong.stderr)")
        let folder = try await runProcess(try Self.executable.path, keyArguments + [directory.path])
        #expect(folder.stderr.contains("it is a directory"), "\(folder.stderr)")
    }

    @Test
    func printsPortAndCAThenServesAndExitsOnSIGTERM() async throws {
        let exited = AsyncStream<Int32>.makeStream()
        let (process, fields, line) = try await start(["--port", "0", "--max-streams", "10", "--control-port", "0", "--history", "5"]) { process in
            process.terminationHandler = { exited.continuation.yield($0.terminationStatus) }
        }
        defer { if process.isRunning { process.terminate() } }
        #expect(line.hasPrefix("listening "), "first line: \(line)")
        let port = try #require(fields["port"].flatMap(Int.init), "no port in: \(line)")
        let ca = try #require(fields["ca"], "no ca in: \(line)")
        #expect(fields["control"] != nil)
        // No key configured: the request is refused for the token, which proves TLS, ALPN h2 and validation.
        let result = try await runProcess("/usr/bin/curl", [
            "-sS", "--http2", "--cacert", ca, "--max-time", "10", "-w", " %{http_code} %{http_version}",
            "-H", "apns-topic: com.example.app", "-H", "authorization: bearer a.b.c", "--data-binary", "{}",
            "https://localhost:\(port)/3/device/\(deviceToken)",
        ])
        #expect(result.stdout == #"{"reason":"InvalidProviderToken"} 403 2"#, "curl: \(result.stdout) \(result.stderr)")
        process.terminate()  // SIGTERM
        let status = try await withDeadline("apns-mock exiting after SIGTERM") {
            for await status in exited.stream { return status }
            return -1
        }
        #expect(status == 0)
    }

    /// `--management-port 0`: the first line gains ` management=<port>` (after `control=`), and that port serves
    /// the channel API with the same TLS certificate; `--broadcast-disabled-bundle` turns an app's broadcasts off.
    @Test
    func aManagementPortIsPrintedAndServesTheChannelAPI() async throws {
        let directory = try makeTemporaryDirectory("mock-management")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = TestSigningKey(keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let keyPath = directory.appendingPathComponent("AuthKey_\(key.keyID).p8").path
        try key.pem.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let (process, fields, line) = try await start([
            "--port", "0", "--control-port", "0", "--management-port", "0",
            "--key-id", key.keyID, "--team-id", key.teamID, "--public-key", keyPath,
            "--broadcast-disabled-bundle", "com.example.off", "--broadcast-disabled-bundle", "com.example.off2",
        ])
        defer { process.terminate() }
        #expect(line.range(of: #"^listening port=\d+ ca=\S+ control=\d+ management=\d+$"#, options: .regularExpression) != nil,
                "first line: \(line)")
        let management = try #require(fields["management"].flatMap(Int.init), "no management port in: \(line)")
        let ca = try #require(fields["ca"])
        #expect(management != fields["port"].flatMap(Int.init))
        let token = "bearer " + key.token(issuedAt: Int64(Date().timeIntervalSince1970))
        func curl(_ path: String, authorization: String = token) async throws -> String {
            let result = try await runProcess("/usr/bin/curl", [
                "-sS", "--http2", "--cacert", ca, "--max-time", "10", "-w", " %{http_code} %{http_version}",
                "-H", "authorization: \(authorization)", "https://localhost:\(management)\(path)",
            ])
            #expect(result.status == 0, "curl: \(result.stderr)")
            return result.stdout
        }
        #expect(try await curl("/1/apps/com.example.app/all-channels") == #"{"channels":[]} 200 2"#)
        #expect(try await curl("/1/apps/com.example.app/all-channels", authorization: "bearer a.b.c")
            == #"{"reason":"InvalidProviderToken"} 403 2"#)
        for disabled in ["com.example.off", "com.example.off2"] {
            #expect(try await curl("/1/apps/\(disabled)/all-channels") == #"{"reason":"FeatureNotEnabled"} 400 2"#)
        }
        #expect(try await curl("/3/device/\(deviceToken)") == #"{"reason":"BadPath"} 404 2"#)
    }

    /// `--key-scope`: keys restricted as Apple allows since 2025 — to one environment (403
    /// BadEnvironmentKeyInToken in the other) and to bundle ids (InvalidProviderToken for others), checked
    /// with curl; a scope naming no --key-id, or an unknown environment, is refused at start.
    @Test
    func keyScopesRestrictKeysToAnEnvironmentAndBundleIDs() async throws {
        let directory = try makeTemporaryDirectory("mock-scopes")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sandboxOnly = TestSigningKey(keyID: "DEV123DEFG", teamID: "DEF123GHIJ")
        let appOnly = TestSigningKey(keyID: "PRD123DEFG", teamID: "DEF123GHIJ")
        var arguments = ["--port", "0", "--environment", "production"]
        for key in [sandboxOnly, appOnly] {
            let path = directory.appendingPathComponent("AuthKey_\(key.keyID).p8").path
            try key.pem.write(toFile: path, atomically: true, encoding: .utf8)
            arguments += ["--key-id", key.keyID, "--team-id", key.teamID, "--public-key", path]
        }
        let (process, fields, line) = try await start(arguments + [
            "--key-scope", "DEV123DEFG=development", "--key-scope", "PRD123DEFG=production:com.example.app",
        ])
        defer { process.terminate() }
        let port = try #require(fields["port"], "first line: \(line)")
        let ca = try #require(fields["ca"])
        func push(_ key: TestSigningKey, topic: String) async throws -> String {
            let result = try await runProcess("/usr/bin/curl", [
                "-sS", "--http2", "--cacert", ca, "--max-time", "10", "-w", " %{http_code}",
                "-H", "apns-topic: \(topic)", "-H", "apns-push-type: alert",
                "-H", "authorization: bearer \(key.token(issuedAt: Int64(Date().timeIntervalSince1970)))",
                "--data-binary", #"{"aps":{"alert":"hi"}}"#, "https://localhost:\(port)/3/device/\(deviceToken)",
            ])
            return result.stdout
        }
        #expect(try await push(sandboxOnly, topic: "com.example.app") == #"{"reason":"BadEnvironmentKeyInToken"} 403"#)
        #expect(try await push(appOnly, topic: "com.example.other") == #"{"reason":"InvalidProviderToken"} 403"#)
        #expect(try await push(appOnly, topic: "com.example.app") == " 200")

        for (scope, message) in [
            ("NOSUCHKEY1=development", "--key-scope names key id NOSUCHKEY1, which no --key-id gives"),
            ("DEV123DEFG=staging", "--key-scope 'DEV123DEFG=staging': the environment must be production, development or both, not 'staging'"),
        ] {
            let result = try await runProcess(try Self.executable.path, arguments + ["--key-scope", scope])
            #expect(result.status != 0)
            #expect(result.stderr.contains(message), "\(result.stderr)")
        }
    }

    @Test
    func withoutAManagementPortTheFirstLineIsUnchanged() async throws {
        let (process, fields, line) = try await start(["--port", "0"])
        defer { process.terminate() }
        #expect(fields["management"] == nil && fields["control"] == nil, "first line: \(line)")
        #expect(line.range(of: #"^listening port=\d+ ca=\S+$"#, options: .regularExpression) != nil, "first line: \(line)")
    }

    /// Starts apns-mock with `arguments`; returns it with the fields of its first line (`port`, `ca`, …).
    private func start(
        _ arguments: [String], configure: (Process) -> Void = { _ in }
    ) async throws -> (process: Process, fields: [String: String], line: String) {
        let process = Process()
        process.executableURL = try Self.executable
        process.arguments = arguments
        configure(process)
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try startProcess(process)
        let line = try await withDeadline("the first line of apns-mock") {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    var bytes: [UInt8] = []
                    while true {
                        let chunk = out.fileHandleForReading.readData(ofLength: 1)
                        if chunk.isEmpty || chunk.first == UInt8(ascii: "\n") { break }
                        bytes.append(contentsOf: chunk)
                    }
                    continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
                }
            }
        }
        let fields = Dictionary(
            line.split(separator: " ").dropFirst().compactMap { field -> (String, String)? in
                let parts = field.split(separator: "=", maxSplits: 1)
                return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
            },
            uniquingKeysWith: { first, _ in first }
        )
        return (process, fields, line)
    }

    /// `--tls-dir`: a restarted mock presents the same certificate, so a client trusting its ca.pem (a relay
    /// with apns.caFile) reconnects; the key is readable by its owner only.
    @Test
    func aTLSDirectoryKeepsTheCertificateAcrossRestarts() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mock-tls-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var certificates: [String] = []
        for round in 0..<2 {
            let (process, fields, _) = try await start(["--port", "0", "--tls-dir", directory])
            defer { process.terminate() }
            let ca = try #require(fields["ca"], "round \(round): \(fields)")
            #expect(ca == directory + "/ca.pem")
            certificates.append(try String(contentsOfFile: ca, encoding: .utf8))
            let port = try #require(fields["port"])
            let result = try await runProcess("/usr/bin/curl", [
                "-sS", "--http2", "--cacert", ca, "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
                "-H", "apns-topic: com.example.app", "-H", "authorization: bearer a.b.c", "--data-binary", "{}",
                "https://localhost:\(port)/3/device/\(deviceToken)",
            ])
            #expect(result.stdout == "403", "round \(round): TLS verified with the kept CA: \(result.stdout) \(result.stderr)")
        }
        #expect(certificates.count == 2 && certificates[0] == certificates[1], "the same certificate after a restart")
        let permissions = try FileManager.default.attributesOfItem(atPath: directory + "/key.pem")[.posixPermissions] as? Int
        #expect(permissions == 0o600)
    }
}
