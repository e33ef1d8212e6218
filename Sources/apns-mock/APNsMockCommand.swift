import APNsCore
import APNsMock
import ArgumentParser
import Foundation
import Logging
import enum ServiceSupport.ProductVersion

/// Stand-alone mock APNs. First line on stdout:
/// `listening port=<port> ca=<path>[ control=<port>][ management=<port>]`.
@main
struct APNsMockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-mock",
        abstract: "Mock APNs provider API server (TLS, HTTP/2, ES256 provider tokens, fault injection).",
        version: ProductVersion.string
    )

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0 picks one).") var port = 0
    @Option(help: "Environment: production or development (adds apns-unique-id).") var environment = "production"
    @Option(name: .customLong("key-id"), help: "Key ID of a trusted provider key (repeat with --team-id/--public-key).")
    var keyIDs: [String] = []
    @Option(name: .customLong("team-id"), help: "Team ID of the matching --key-id.") var teamIDs: [String] = []
    @Option(name: .customLong("public-key"), help: "PEM file (public key or .p8 private key) of the matching --key-id.")
    var publicKeys: [String] = []
    @Option(name: .customLong("key-scope"), help: ArgumentHelp(
        "Restrict a --key-id as Apple lets a team since 2025: KEYID=ENVIRONMENT[:BUNDLE,…] with ENVIRONMENT production, development or both; the key is answered 403 BadEnvironmentKeyInToken in the other environment, InvalidProviderToken for other bundle ids (repeatable).",
        valueName: "scope"))
    var keyScopes: [String] = []
    @Option(help: "PEM CA file: require client certificates signed by it (certificate authentication).")
    var clientCaFile: String?
    @Option(help: "MAX_CONCURRENT_STREAMS after the first valid token.") var maxStreams = 1000
    @Option(help: "Emulated round-trip time in milliseconds (delays replies and WINDOW_UPDATEs).") var rttMs = 0
    @Option(help: "Jitter in milliseconds around --rtt-ms.") var jitterMs = 0
    @Option(help: "Random failure: REASON=RATE, e.g. TooManyRequests=0.01 (repeatable).") var failureRate: [String] = []
    @Option(help: "Send GOAWAY after this many streams per connection.") var goAwayAfter: Int?
    @Flag(help: "Reject a second different token of the same key with an iat within 20 minutes (replicas must share one token).")
    var strictFleet = false
    @Option(help: "Port of the HTTP/1.1 JSON control interface (0 picks one).") var controlPort: Int?
    @Option(help: "Port of the broadcast channel-management API (/1/apps/…; 0 picks one).") var managementPort: Int?
    @Option(help: "Bundle id whose broadcast feature is off: broadcasts and channel requests get FeatureNotEnabled (repeatable).")
    var broadcastDisabledBundle: [String] = []
    @Option(help: "Event-loop threads.") var threads = 1
    @Option(help: "Accepted notifications kept for the control interface's /accepted (oldest dropped first).")
    var history = 10_000
    @Option(help: "Keep the self-signed certificate in this directory (ca.pem, key.pem): created on the first start, reused after, so a client that trusts ca.pem reconnects to a restarted mock.")
    var tlsDir: String?
    @Option(help: "Certificate chain PEM (with --tls-key and --tls-ca); default: self-signed.") var tlsCert: String?
    @Option(help: "Private key PEM for --tls-cert.") var tlsKey: String?
    @Option(help: "CA PEM clients should trust for --tls-cert.") var tlsCa: String?
    @Option(help: "Log level (trace, debug, info, warning, error).") var logLevel = "warning"

    func validate() throws {
        guard keyIDs.count == teamIDs.count, keyIDs.count == publicKeys.count else {
            throw ValidationError("--key-id, --team-id and --public-key must be given the same number of times")
        }
        if tlsDir != nil && tlsCert != nil {
            throw ValidationError("--tls-dir and --tls-cert are alternatives: give one")
        }
        guard APNsEnvironment(rawValue: environment) != nil else {
            throw ValidationError("--environment must be production or development")
        }
        let scopes = try Self.scopes(keyScopes)
        if let unknown = scopes.keys.sorted().first(where: { !keyIDs.contains($0) }) {
            throw ValidationError("--key-scope names key id \(unknown), which no --key-id gives")
        }
    }

    /// `--key-scope KEYID=ENVIRONMENT[:BUNDLE,…]` by key id: the environment the key is limited to (`nil`:
    /// both) and its bundle ids (`nil`: any of the team's).
    static func scopes(_ values: [String]) throws -> [String: (environment: APNsEnvironment?, bundleIDs: Set<String>?)] {
        var scopes: [String: (environment: APNsEnvironment?, bundleIDs: Set<String>?)] = [:]
        for value in values {
            let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw ValidationError("--key-scope '\(value)' is not KEYID=ENVIRONMENT[:BUNDLE,…]")
            }
            let scope = parts[1].split(separator: ":", maxSplits: 1).map(String.init)
            let environment: APNsEnvironment?
            switch scope.first ?? "" {
            case "both": environment = nil
            case let name:
                guard let one = APNsEnvironment(rawValue: name) else {
                    throw ValidationError("--key-scope '\(value)': the environment must be production, development or both, not '\(name)'")
                }
                environment = one
            }
            let bundles = scope.count == 2 ? Set(scope[1].split(separator: ",").map(String.init)) : nil
            scopes[parts[0]] = (environment, bundles)
        }
        return scopes
    }

    func run() async throws {
        var logger = Logger(label: "apns-mock")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .warning
        var configuration = APNsMockConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.environment = APNsEnvironment(rawValue: environment) ?? .production
        configuration.maxConcurrentStreams = maxStreams
        configuration.strictFleet = strictFleet
        configuration.controlPort = controlPort
        configuration.managementPort = managementPort
        configuration.broadcastDisabledBundles = Set(broadcastDisabledBundle)
        configuration.eventLoopThreads = threads
        configuration.acceptedHistoryLimit = history
        let scopes = try Self.scopes(keyScopes)
        configuration.providerKeys = try zip(keyIDs, zip(teamIDs, publicKeys)).map { keyID, rest in
            let (teamID, path) = rest
            let pem = try readFile(path, option: "--public-key")
            do {
                return try ProviderKey(
                    keyID: keyID, teamID: teamID, pem: pem, bundleIDs: scopes[keyID]?.bundleIDs, environment: scopes[keyID]?.environment)
            } catch {
                throw StartError("--public-key '\(path)' (key id \(keyID)) is not a PEM public key or P-256 private key (\(error))")
            }
        }
        if let clientCaFile {
            configuration.clientCertificateTrustRootsPEM = try readFile(clientCaFile, option: "--client-ca-file")
        }
        if let tlsDir { configuration.tls = .selfSignedIn(directory: tlsDir) }
        if let tlsCert, let tlsKey, let tlsCa {
            configuration.tls = .files(certificateChainPEMPath: tlsCert, privateKeyPEMPath: tlsKey, caPEMPath: tlsCa)
        }
        let server = APNsMockServer(configuration: configuration, logger: logger)
        if rttMs > 0 || jitterMs > 0 {
            server.faults.latency = .init(rtt: .milliseconds(rttMs), jitter: .milliseconds(jitterMs))
        }
        for entry in failureRate {
            let parts = entry.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let rate = Double(parts[1]) else {
                throw ValidationError("--failure-rate wants REASON=RATE, got \(entry)")
            }
            server.faults.setFailureRate(rate, for: APNsReason(rawValue: String(parts[0])))
        }
        server.faults.goAwayAfterStreams = goAwayAfter

        let signals = try SignalWaiter()
        let port = try await server.start()
        var line = "listening port=\(port) ca=\(server.caCertificatePEMPath ?? "")"
        if let control = server.controlPort { line += " control=\(control)" }
        if let management = server.managementPort { line += " management=\(management)" }
        print(line)
        fflush(nil)  // all streams: the first line must reach a pipe at once
        let signal = await signals.wait()
        logger.info("stopping on signal \(signal)")
        await server.stop()
    }
}

/// Write end of the pipe the signal handler writes the signal number to (set once, before handlers exist).
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

/// Waits for SIGTERM or SIGINT. A plain signal handler writes the number to a pipe (write(2) is
/// async-signal-safe) and a dispatch thread reads it, so the handler is installed before the server starts
/// and no cooperative-pool thread blocks.
final class SignalWaiter: Sendable {
    private let readEnd: Int32

    struct SetupFailed: Error, CustomStringConvertible {
        let description: String
    }

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw SetupFailed(description: "cannot create the signal pipe: errno \(errno)") }
        readEnd = fds[0]
        signalPipeWriteEnd = fds[1]
        for number in [SIGTERM, SIGINT] {
            signal(number) { received in
                var byte = UInt8(truncatingIfNeeded: received)
                _ = write(signalPipeWriteEnd, &byte, 1)
            }
        }
    }

    func wait() async -> Int32 {
        let fd = readEnd
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var byte: UInt8 = 0
                while read(fd, &byte, 1) < 0, errno == EINTR {}
                continuation.resume(returning: Int32(byte))
            }
        }
    }
}

/// A start-up failure, printed as `Error: <message>` without the usage text.
struct StartError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The text of the file an option names, or a `StartError` saying which option and why it cannot be read
/// (the operating system's reason: missing, a directory, permission denied).
func readFile(_ path: String, option: String) throws -> String {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        throw StartError("cannot read \(option) '\(path)': no such file")
    }
    if isDirectory.boolValue { throw StartError("cannot read \(option) '\(path)': it is a directory") }
    let descriptor = open(path, O_RDONLY)
    if descriptor < 0 { throw StartError("cannot read \(option) '\(path)': \(String(cString: strerror(errno)))") }
    close(descriptor)
    do {
        return try String(contentsOfFile: path, encoding: .utf8)
    } catch {
        throw StartError("cannot read \(option) '\(path)': not UTF-8 text (a PEM file is)")
    }
}
