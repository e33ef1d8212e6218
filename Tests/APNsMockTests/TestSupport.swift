import APNsCore
import APNsMock
import Crypto
import Foundation
import ServiceSupport
import Synchronization
import Testing

/// A provider signing key for tests (signs with swift-crypto; the mock verifies with it too, but through the
/// JWT text, so encoding bugs on either side show up).
struct TestSigningKey: Sendable {
    var keyID: String
    var teamID: String
    var privateKey = P256.Signing.PrivateKey()

    var providerKey: ProviderKey { ProviderKey(keyID: keyID, teamID: teamID, publicKey: privateKey.publicKey) }

    /// An ES256 JWT; `der: true` encodes the signature as DER instead of raw r||s.
    func token(issuedAt: Int64, der: Bool = false, signWith other: P256.Signing.PrivateKey? = nil) -> String {
        let header = base64URL(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
        let input = header + "." + claims
        let signature = try! (other ?? privateKey).signature(for: Data(input.utf8))
        return input + "." + base64URL(der ? signature.derRepresentation : signature.rawRepresentation)
    }

    func authorization(issuedAt: Int64, der: Bool = false) -> (String, String) {
        ("authorization", "bearer " + token(issuedAt: issuedAt, der: der))
    }
}

func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

let deviceToken = String(repeating: "ab", count: 32)
let bundleID = "com.example.app"

/// A started mock with one key, and helpers to build requests. `stop()` at the end of each test.
struct MockFixture: Sendable {
    var server: APNsMockServer
    var key: TestSigningKey
    var otherKeySameTeam: TestSigningKey
    var otherTeamKey: TestSigningKey
    var clock: ManualWallClock
    var port: Int
    var caPEM: String
    var caPath: String
    var clients = ClientTracker()
    /// One token for the fixture's lifetime (ECDSA signatures are randomised: re-signing makes a new token).
    var authorizationValue: String = ""

    static func start(_ adjust: (inout APNsMockConfiguration) -> Void = { _ in }) async throws -> MockFixture {
        let key = TestSigningKey(keyID: "KEY0000001", teamID: "TEAM000001")
        let sameTeam = TestSigningKey(keyID: "KEY0000002", teamID: "TEAM000001")
        let otherTeam = TestSigningKey(keyID: "KEY0000003", teamID: "TEAM000002")
        let clock = ManualWallClock()
        var configuration = APNsMockConfiguration()
        configuration.providerKeys = [key.providerKey, sameTeam.providerKey, otherTeam.providerKey]
        configuration.clock = clock.clock
        adjust(&configuration)
        let server = APNsMockServer(configuration: configuration)
        let port = try await server.start()
        return MockFixture(
            server: server, key: key, otherKeySameTeam: sameTeam, otherTeamKey: otherTeam, clock: clock, port: port,
            caPEM: server.caCertificatePEM!, caPath: server.caCertificatePEMPath!,
            authorizationValue: "bearer " + key.token(issuedAt: clock.nowSeconds)
        )
    }

    func connect(alpn: Bool = true) async throws -> TestHTTP2Client {
        let client = try await TestHTTP2Client.connect(port: port, caPEM: caPEM, alpn: alpn)
        clients.add(client)
        return client
    }

    /// Closes every client this fixture opened, then the server.
    func stop() async {
        for client in clients.all() { await client.close() }
        await server.stop()
    }

    var authorization: (String, String) { ("authorization", authorizationValue) }

    /// A valid alert push, with `overrides` replacing (or, with an empty value, removing) headers.
    func request(
        token: String = deviceToken,
        _ overrides: [(String, String?)] = [],
        body: [UInt8] = Array(#"{"aps":{"alert":"hi"}}"#.utf8),
        method: String = "POST",
        path: String? = nil
    ) -> TestRequest {
        var headers: [(String, String)] = [
            authorization, ("apns-topic", bundleID), ("apns-push-type", "alert"), ("apns-priority", "10"),
        ]
        for (name, value) in overrides {
            headers.removeAll { $0.0 == name }
            if let value { headers.append((name, value)) }
        }
        return TestRequest(path: path ?? "/3/device/\(token)", headers: headers, body: body, method: method)
    }
}

final class ClientTracker: Sendable {
    private let clients = Mutex<[TestHTTP2Client]>([])
    func add(_ client: TestHTTP2Client) { clients.withLock { $0.append(client) } }
    func all() -> [TestHTTP2Client] { clients.withLock { $0 } }
}

/// Runs a command-line tool with a deadline; returns exit status and output.
func runTool(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(20)) async throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let exited = AsyncStream<Void>.makeStream()
    process.terminationHandler = { _ in exited.continuation.yield(); exited.continuation.finish() }
    try process.run()
    // Read output on dispatch threads: blocking reads on the cooperative pool (2 threads here) would starve
    // the mock's own async work.
    async let stdoutData = readToEnd(out.fileHandleForReading)
    async let stderrData = readToEnd(err.fileHandleForReading)
    let finished = await withTaskGroup(of: Bool.self) { group in
        group.addTask { for await _ in exited.stream { return true }; return true }
        group.addTask { try? await Task.sleep(for: timeout); return false }
        let first = await group.next()!
        group.cancelAll()
        return first
    }
    if !finished { process.terminate() }
    let stdout = String(decoding: await stdoutData, as: UTF8.self)
    let stderr = String(decoding: await stderrData, as: UTF8.self)
    if !finished {
        Issue.record("\(executable) \(arguments.joined(separator: " ")) did not exit within \(timeout); stderr: \(stderr)")
    }
    process.waitUntilExit()
    return (process.terminationStatus, stdout, stderr)
}

private func readToEnd(_ handle: FileHandle) async -> Data {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: handle.readDataToEndOfFile()) }
    }
}

/// Waits for a future with a deadline; the message says what did not happen.
func awaitWithDeadline<T: Sendable>(_ what: String, timeout: Duration = .seconds(5), _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw APNsMockTimeout(message: "timed out after \(timeout) waiting for \(what)")
        }
        return value
    }
}
