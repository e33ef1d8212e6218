import Foundation
import RelaySandbox
import ServiceSupport

// Two figures of a relay that is not busy:
//  - threads: how many threads the relay runs with 1 and with 64 APNs connections open (a thread per
//    connection shows as one more thread per connection);
//  - idle: the CPU a relay with open connections spends while no events arrive (Kafka polls, heartbeats,
//    timers, HTTP/2 pings).

/// `threads [--connections N]`: `Threads:` of the relay once 1, then N (64) APNs connections are ready.
func threads() async throws {
    let many = option("connections", 64)
    say("== relay threads with 1 and with \(many) APNs connections (apns.pool.minConnections = maxConnections)")
    let withOne = try await relayThreads(connections: 1)
    let withMany = try await relayThreads(connections: many)
    row("relay threads with 1 / \(many) APNs connections", "\(withOne) / \(withMany)")
}

/// Runs a relay whose pool keeps exactly `connections` connections, and counts its threads once they are
/// all ready (the relay's `apns_client_connections{state="ready"}` gauge).
func relayThreads(connections: Int) async throws -> Int {
    var options = RelaySandbox.Options()
    options.partitions = 4
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    let reader = try OutputReader(sandbox: sandbox, logger: logger)
    var tally = ResultTally(resultsTopic: options.topics.results)
    let adminPort = try freeLocalPort()
    // min = max: the pool opens exactly this many, however the load goes (keys `apns.pool.minConnections` and
    // `apns.pool.maxConnections`, RelayAppConfiguration.environmentName).
    let relay = try RelayUnderTest(sandbox, extra: [
        "APNS_RELAY_APNS_POOL_MIN_CONNECTIONS": "\(connections)",
        "APNS_RELAY_APNS_POOL_MAX_CONNECTIONS": "\(connections)",
        "APNS_RELAY_ADMIN_PORT": "\(adminPort)",
    ])
    // A pool opens connections when it is asked for work (at most two connecting at a time,
    // PoolStateMachine.connectionsToOpen), not on its own: rounds of a few events, each round's results waited
    // for, until the relay's /metrics shows every connection ready.
    let body = SampleEvents.payload(bytes: 300)
    var ready = 0
    var rounds = 0
    try await waitUntil("\(connections) APNs connections ready in the relay's /metrics (\(ready) after \(rounds) rounds of events)", timeout: .seconds(120), interval: .milliseconds(1)) {
        ready = try readyConnections(adminPort: adminPort)
        guard ready < connections else { return true }
        let keys = (0..<16).map { "t\(rounds)-\($0)" }
        rounds += 1
        try await sandbox.produceKept(keys.enumerated().map { n, key in (key: key, value: SampleEvents.event(id: key, deviceToken: SampleEvents.token(n), payload: body)) })
        try await tally.collect(from: reader, expected: Set(keys), timeout: .seconds(60))
        return false
    }
    let threads = relay.probe.threads ?? 0
    say("\(ready) connections ready after \(rounds) rounds of 16 events (mock APNs: \(sandbox.apns.openConnections) open): relay has \(threads) threads")
    relay.stop()
    await reader.close()
    await sandbox.stop()
    return threads
}

/// `idle [--seconds S]`: relay CPU as % of one core over S (20) seconds without events, its connections open.
func idle() async throws {
    let seconds = option("seconds", 20)
    var options = RelaySandbox.Options()
    options.partitions = 32
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    say("== idle: relay with its connections open, no events for \(seconds) s, default configuration")
    let reader = try OutputReader(sandbox: sandbox, logger: logger)
    var tally = ResultTally(resultsTopic: options.topics.results)
    let relay = try RelayUnderTest(sandbox)
    // Warm-up: the relay joins its group and opens a connection for a first event; its result says both
    // happened. The pool keeps the connection for apns.pool.idleTimeoutMs (10 minutes by default).
    try await sandbox.produceKept([(key: "warm-up", value: SampleEvents.event(id: "warm-up", deviceToken: SampleEvents.token(0), payload: SampleEvents.payload(bytes: 300)))])
    try await tally.collect(from: reader, untilResults: 1, timeout: .seconds(60))
    let openBefore = sandbox.apns.openConnections
    let cpuBefore = relay.probe.cpuSeconds ?? 0
    let switchesBefore = relay.probe.contextSwitches ?? .init(voluntary: 0, involuntary: 0)
    let started = ContinuousClock.now
    try await Task.sleep(for: .seconds(seconds))  // the measurement window itself: nothing to wait for
    let window = (ContinuousClock.now - started).seconds
    let cpu = (relay.probe.cpuSeconds ?? cpuBefore) - cpuBefore
    let switches = (relay.probe.contextSwitches ?? switchesBefore) - switchesBefore
    let threads = relay.probe.threads ?? 0
    let openAfter = sandbox.apns.openConnections
    relay.stop()
    await reader.close()
    await sandbox.stop()
    guard openBefore > 0, openAfter >= openBefore else {
        throw BenchmarkError("the relay's connections did not stay open through the idle window (mock APNs: \(openBefore) before, \(openAfter) after)")
    }
    let percent = cpu / window * 100
    say("idle: relay CPU \(f(cpu, 2)) s over \(f(window, 1)) s = \(f(percent, 2)) % of a core; "
        + "\(f(Double(switches.voluntary) / window, 1)) voluntary + \(f(Double(switches.involuntary) / window, 1)) involuntary context switches/s; "
        + "\(threads) threads, \(openAfter) APNs connections open")
    row("idle CPU % of a core (connections open, no events)", f(percent, 2))
}

/// Ready APNs connections, summed over the relay's pools, from its /metrics (curl, as h2load and kcat run
/// for the floors); 0 while the endpoint does not answer yet.
func readyConnections(adminPort: Int) throws -> Int {
    let (output, _) = try runMeasured("curl -sf --max-time 2 http://127.0.0.1:\(adminPort)/metrics")
    // `apns_client_connections{credential="…",environment="…",state="ready"} 3`
    return output.split(separator: "\n")
        .filter { $0.hasPrefix("apns_client_connections{") && $0.contains("state=\"ready\"") }
        .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        .reduce(0) { $0 + Int($1) }
}

/// A TCP port free on 127.0.0.1 now (bound to port 0, read back, closed). Another process could take it
/// before the relay binds it; the relay then exits at once ("admin port … is in use") and fails the run.
func freeLocalPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw BenchmarkError("socket: errno \(errno)") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let result = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
    }
    guard result else { throw BenchmarkError("bind or getsockname on 127.0.0.1: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}
