// apns-client-tool: small CLI around APNsClient for tests and benchmarks.
//
//   token  --key P8 --kid K --team T --now UNIX          print the fleet token for that instant
//   bench  --port N [--host H] [--ca PEM] [--key P8 --kid K --team T] [--requests N] [--concurrency C]
//          [--payload BYTES] [--min-connections N] [--max-connections N] [--bundle ID]
//   fleet  --port N --ca PEM --key P8 --kid K --team T --start UNIX --hours H --step S --per-step N
//          send through one client while an injected clock walks simulated hours; prints reason counts
import APNsClient
import APNsCore
import Foundation
import Logging
import ServiceSupport
import Synchronization

struct Arguments {
    var values: [String: String] = [:]
    init(_ args: ArraySlice<String>) {
        var it = args.makeIterator()
        while let a = it.next() {
            guard a.hasPrefix("--") else { continue }
            let name = String(a.dropFirst(2))
            if name == "insecure" { values[name] = "1"; continue }
            values[name] = it.next() ?? ""
        }
    }
    subscript(_ name: String) -> String? { values[name] }
    func int(_ name: String, _ fallback: Int) -> Int { values[name].flatMap { Int($0) } ?? fallback }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(2)
}

func required(_ a: Arguments, _ name: String) -> String {
    guard let v = a[name] else { fail("--\(name) is required") }
    return v
}

func signer(_ a: Arguments) throws -> ProviderTokenSigner? {
    guard let key = a["key"] else { return nil }
    let pem = try String(contentsOfFile: key, encoding: .utf8)
    return try ProviderTokenSigner(pem: pem, keyID: required(a, "kid"), teamID: required(a, "team"))
}

func clientConfiguration(_ a: Arguments, clock: WallClock = .system) throws -> APNsClientConfiguration {
    let credential: APNsClientConfiguration.Credential
    if let s = try signer(a) {
        credential = .token(s)
    } else if let cert = a["cert"], let key = a["cert-key"] {
        credential = .certificate(.pem(certificateFile: cert, privateKeyFile: key))
    } else {
        fail("need --key/--kid/--team or --cert/--cert-key")
    }
    var configuration = APNsClientConfiguration(credential: credential)
    configuration.route(allEnvironmentsTo: .init(host: a["host"] ?? "127.0.0.1", port: a.int("port", 443)))
    if let ca = a["ca"] { configuration.trust = .caFile(ca) }
    if a["insecure"] != nil { configuration.trust = .insecureNoVerification }
    configuration.pool.minConnections = a.int("min-connections", 1)
    configuration.pool.maxConnections = a.int("max-connections", 8)
    configuration.clock = clock
    return configuration
}

func randomHex(bytes: Int) -> String {
    (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func payload(bytes: Int) -> [UInt8] {
    let base = #"{"aps":{"alert":"hello"},"pad":""#
    let pad = max(0, bytes - base.utf8.count - 2)
    return Array((base + String(repeating: "x", count: pad) + "\"}").utf8)
}

func bench(_ a: Arguments, eventLoops: APNsEventLoopGroup) async throws {
    var logger = Logger(label: "apns-client-tool")
    logger.logLevel = .warning
    let client = try APNsClient(configuration: clientConfiguration(a), eventLoops: eventLoops, logger: logger)
    let total = a.int("requests", 100_000)
    let concurrency = a.int("concurrency", 1000)
    let body = payload(bytes: a.int("payload", 100))
    let bundle = a["bundle"] ?? "com.example.app"
    let tokens = try (0..<64).map { _ in try DeviceToken(hex: randomHex(bytes: 32)) }
    // Warm-up: one request opens the first connection and lifts the 1-stream limit.
    _ = try await client.send(APNsNotification(deviceToken: tokens[0], topic: bundle, pushType: .alert, payload: body[...]), timeout: .seconds(10))
    final class Counters: Sendable {
        let next = Atomic<Int>(0)
        let ok = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
    }
    let counters = Counters()
    let tokensCopy = tokens
    let cpu0 = cpuSeconds()
    let t0 = ContinuousClock.now
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<concurrency {
            group.addTask {
                while true {
                    let i = counters.next.add(1, ordering: .relaxed).oldValue
                    if i >= total { return }
                    let n = APNsNotification(deviceToken: tokensCopy[i & 63], topic: bundle, pushType: .alert, payload: body[...])
                    do {
                        let r = try await client.send(n, timeout: .seconds(30))
                        if r.status == 200 { counters.ok.add(1, ordering: .relaxed) } else { counters.failed.add(1, ordering: .relaxed) }
                    } catch {
                        counters.failed.add(1, ordering: .relaxed)
                    }
                }
            }
        }
    }
    let elapsed = (ContinuousClock.now - t0)
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let cpu = cpuSeconds() - cpu0
    let connections = client.connectionCount(for: .production)
    print(String(format: "requests=%d ok=%d failed=%d seconds=%.3f rate=%.0f/s cpu_us_per_request=%.2f connections=%d concurrency=%d payload=%d",
                 total, counters.ok.load(ordering: .relaxed), counters.failed.load(ordering: .relaxed), seconds, Double(total) / seconds,
                 cpu / Double(total) * 1e6, connections, concurrency, body.count))
    await client.shutdown(deadline: .now.advanced(by: .seconds(5)))
}

func fleet(_ a: Arguments, eventLoops: APNsEventLoopGroup) async throws {
    var logger = Logger(label: "apns-client-tool")
    logger.logLevel = .warning
    // Lockstep with the test: it writes the simulated UNIX time to --clock-file (and sets the mock's clock to
    // the same value); we send --per-step notifications at that time and write it to --progress-file.
    // A negative time ends the run.
    let clockFile = required(a, "clock-file")
    let progressFile = required(a, "progress-file")
    final class SimulatedTime: Sendable { let value = Atomic<Int64>(0) }
    let simulated = SimulatedTime()
    let clock = WallClock { simulated.value.load(ordering: .relaxed) * 1_000_000_000 }
    let client = try APNsClient(configuration: clientConfiguration(a, clock: clock), eventLoops: eventLoops, logger: logger)
    let perStep = a.int("per-step", 3)
    let bundle = a["bundle"] ?? "com.example.app"
    let device = try DeviceToken(hex: a["device"] ?? randomHex(bytes: 32))
    var counts: [String: Int] = [:]
    var last = Int64.min
    while true {
        var now = last
        let deadline = ContinuousClock.now.advanced(by: .seconds(60))
        while now == last {
            guard ContinuousClock.now < deadline else { fail("clock file did not advance within 60 s") }
            if let text = try? String(contentsOfFile: clockFile, encoding: .utf8),
                let t = Int64(text.trimmingCharacters(in: .whitespacesAndNewlines)) { now = t }
            if now == last { try await Task.sleep(for: .milliseconds(2)) }
        }
        if now < 0 { break }
        simulated.value.store(now, ordering: .relaxed)
        for _ in 0..<perStep {
            let n = APNsNotification(deviceToken: device, topic: bundle, pushType: .alert, payload: payload(bytes: 64)[...])
            do {
                let r = try await client.send(n, timeout: .seconds(10))
                counts[r.reason?.rawValue ?? String(r.status), default: 0] += 1
            } catch let e as APNsClientError {
                counts["error:\(e.transportFailure.map { "\($0)" } ?? "\(e.code)")", default: 0] += 1
            }
        }
        last = now
        try String(now).write(toFile: progressFile + ".tmp", atomically: false, encoding: .utf8)
        rename(progressFile + ".tmp", progressFile)
    }
    print(counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
    await client.shutdown(deadline: .now.advanced(by: .seconds(5)))
}

let args = CommandLine.arguments
guard args.count >= 2 else { fail("usage: apns-client-tool token|bench|fleet …") }
let a = Arguments(args.dropFirst(2))
do {
    switch args[1] {
    case "token":
        guard let s = try signer(a) else { fail("--key required") }
        guard let now = Int64(required(a, "now")) else { fail("--now must be an integer") }
        print(try s.token(now: now).jwt)
    case "bench":
        let eventLoops = try APNsEventLoopGroup()
        try await eventLoops.withRunningLoops { try await bench(a, eventLoops: eventLoops) }
    case "fleet":
        let eventLoops = try APNsEventLoopGroup()
        try await eventLoops.withRunningLoops { try await fleet(a, eventLoops: eventLoops) }
    default:
        fail("unknown command \(args[1])")
    }
} catch {
    fail("error: \(error)")
}
