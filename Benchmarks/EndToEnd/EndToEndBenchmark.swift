// End-to-end benchmark: mock Kafka + mock APNs in this process, `apns-relay run` as a separate process
// (so its CPU and memory are its own), each figure printed beside a floor measured in the same run.
//
//   EndToEndBenchmark throughput   [--events N] [--partitions P] [--payload BYTES] [--rtt-ms MS]
//   EndToEndBenchmark backpressure [--events N] [--seconds S]
//   EndToEndBenchmark stages
//   EndToEndBenchmark paced        [--rate R] [--seconds S] [--full-speed-ns X] [--fetch-wait-ms MS]
//   EndToEndBenchmark slow-apns    [--events N] [--answers A] [--full-speed-ns X]
//   EndToEndBenchmark threads      [--connections N]
//   EndToEndBenchmark idle         [--seconds S]
//   EndToEndBenchmark allocations  [--events N] [--partitions P] [--payload BYTES] [--preload PATH]
//   EndToEndBenchmark partitions   [--runs EVENTSxPARTITIONS,…] [--payload BYTES]
//   EndToEndBenchmark lanes        [--backlog N] [--app-backlog N] [--seconds S] [--answers A] [--rate R]
//   EndToEndBenchmark tracing      [--events N] [--partitions P]
//   EndToEndBenchmark exactly-once [--events N] [--partitions P] [--pairs K] [--rate R] [--seconds S] [--interval MS]
//
// Every mode prints human-readable lines and `ROW|figure|value|floor|relay/floor` lines, which
// `Benchmarks/end-to-end.sh` gathers into the table `make bench` prints.
import APNsClient
import APNsMock
import Foundation
import Kafka
import Logging
import Relay
import RelaySandbox
import ServiceSupport

let logger = Logger(label: "bench")

/// `--name VALUE` from the command line, else `fallback`.
func option(_ name: String, _ fallback: Int) -> Int {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: "--" + name), index + 1 < arguments.count, let value = Int(arguments[index + 1]) else { return fallback }
    return value
}
/// `--name VALUE` from the command line, else nil.
func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: "--" + name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}
func say(_ line: String) {
    print(line)
    fflush(nil)
}
func row(_ figure: String, _ value: String, floor: String = "", ratio: String = "") { say("ROW|\(figure)|\(value)|\(floor)|\(ratio)") }
func f(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }

/// The `apns-relay` binary beside this one (both built into the same release directory).
let relayBinary = ProcessInfo.processInfo.environment["APNS_RELAY_BINARY"]
    ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("apns-relay").path

/// `apns-relay run` against the sandbox, logging to a temporary file.
final class RelayUnderTest {
    let process = Process()
    let logPath = NSTemporaryDirectory() + "bench-relay-\(UUID().uuidString).log"
    var probe: ProcessProbe { ProcessProbe(pid: process.processIdentifier) }

    init(_ sandbox: RelaySandbox, extra: [String: String] = [:]) throws {
        var environment = sandbox.relayEnvironment(groupID: "bench-\(UUID().uuidString.prefix(8))")
        // BENCH_RELAY_LOG_LEVEL: the relay's log level (default warning; its log is a temporary file).
        environment["APNS_RELAY_LOG_LEVEL"] = ProcessInfo.processInfo.environment["BENCH_RELAY_LOG_LEVEL"] ?? "warning"
        // BENCH_RELAY_ADMIN_PORT: serve the relay's /metrics there, to watch a run (off by default).
        if let port = ProcessInfo.processInfo.environment["BENCH_RELAY_ADMIN_PORT"] { environment["APNS_RELAY_ADMIN_PORT"] = port }
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = URL(fileURLWithPath: relayBinary)
        process.arguments = ["run"]
        process.environment = ProcessInfo.processInfo.environment.merging(environment.merging(extra) { $1 }) { $1 }
        process.standardOutput = log
        process.standardError = log
        // A relay that exits on its own (a refused setting, a crash) fails the benchmark at once, with its
        // log, instead of leaving it waiting for results that never come.
        let logPath = self.logPath
        let stopping = self.stopping
        process.terminationHandler = { process in
            guard !stopping.isSet else { return }
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            FileHandle.standardError.write(Data("error: apns-relay exited with status \(process.terminationStatus) during the benchmark; its log:\n\(log.suffix(4000))\n".utf8))
            exit(1)
        }
        try process.run()
    }

    private let stopping = Flag()

    func stop() {
        stopping.set()
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

/// Checks `condition` every `interval` until it holds; throws naming `what` did not happen once `timeout`
/// passed (for state only visible from outside: the relay's /metrics, a file it writes).
func waitUntil(_ what: @autoclosure () -> String, timeout: Duration, interval: Duration = .milliseconds(50), _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw BenchmarkError("\(what()): not within \(timeout)") }
        try await Task.sleep(for: interval)  // the polling period; the deadline bounds the wait
    }
}

func percentile(_ sorted: [Int64], _ p: Double) -> Int64 {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func makeEvents(_ count: Int, payload: Int) -> [(key: String, value: [UInt8])] {
    let body = SampleEvents.payload(bytes: payload)
    return (0..<count).map { n in (key: "e\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n), payload: body)) }
}

/// An ES256 provider token from the sandbox's key, as the relay signs it.
func providerToken(_ sandbox: RelaySandbox) throws -> String {
    let signer = try ProviderTokenSigner(pem: try String(contentsOfFile: sandbox.keyFile, encoding: .utf8), keyID: sandbox.keyID, teamID: sandbox.teamID)
    return try signer.token(now: Int64(Date().timeIntervalSince1970)).jwt
}

/// h2load against the sandbox's mock APNs: the cost of an HTTP/2 client sending the same requests.
func h2loadFloor(_ sandbox: RelaySandbox, requests: Int, payload: Int, connections: Int, streams: Int) throws -> (cpuPerRequestMicros: Double, requestsPerSecond: Double) {
    let body = NSTemporaryDirectory() + "bench-payload-\(UUID().uuidString)"
    try Array(SampleEvents.payload(bytes: payload).utf8).withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: body)) }
    defer { try? FileManager.default.removeItem(atPath: body) }
    let url = "https://127.0.0.1:\(sandbox.apnsPort)/3/device/\(SampleEvents.token(1))"
    let command = "h2load -n \(requests) -c \(connections) -m \(streams) -d \(body) -H 'authorization: bearer \(try providerToken(sandbox))' "
        + "-H 'apns-topic: com.example.app' -H 'apns-push-type: alert' \(url)"
    let (output, cpu) = try runMeasured(command)
    guard output.contains("\(requests) succeeded") else { throw BenchmarkError("h2load did not succeed:\n\(output.suffix(1500))") }
    let rps = output.split(separator: "\n").first { $0.contains("req/s") && $0.contains("finished in") }
        .flatMap { line in line.split(separator: ",").dropFirst().first?.split(separator: " ").first.flatMap { Double($0) } } ?? 0
    return (cpu * 1e6 / Double(requests), rps)
}

/// kcat reading the input topic and writing every value to another topic (idempotent, acks=all, as the
/// relay's producer): the cost of librdkafka consuming and producing the same messages.
func kcatFloor(_ sandbox: RelaySandbox, messages: Int) throws -> Double {
    let output = "bench-floor-\(UUID().uuidString.prefix(8))"
    try sandbox.cluster.createTopic(output, partitions: sandbox.options.partitions)
    let brokers = sandbox.bootstrapServers
    let command = "kcat -C -b \(brokers) -t \(sandbox.options.inputTopic) -o beginning -e -q -f '%s\\n' "
        + "| kcat -P -b \(brokers) -t \(output) -X enable.idempotence=true -X acks=all -X linger.ms=5"
    let (_, cpu) = try runMeasured(command)
    return cpu * 1e6 / Double(messages)
}

/// Events per second from the first consume to the last completion (`tally` keeps timings).
func eventsPerSecond(_ tally: ResultTally, _ count: Int) -> Double {
    let first = tally.timings.map(\.receivedAt).min() ?? 0
    let last = tally.timings.map(\.completedAt).max() ?? 0
    return Double(count) / max(0.001, Double(last - first) / 1000)
}

func throughput() async throws {
    let count = option("events", 200_000)
    let payload = option("payload", 300)
    let rtt = option("rtt-ms", 0)
    var options = RelaySandbox.Options()
    options.partitions = option("partitions", 32)
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    let label = rtt > 0 ? "\(rtt) ms RTT, \(payload) B" : "0 ms, \(payload) B"
    say("== end to end (\(label)): \(count) events over \(options.partitions) partitions, mock Kafka + mock APNs in the benchmark process, relay in its own")
    let events = makeEvents(count, payload: payload)
    say("event size \(events[0].value.count) B; producing…")
    try await sandbox.produceKept(events)

    // Floors first, on the same sandbox: librdkafka (kcat) consume+produce, h2load against the same mock.
    var kafkaFloor = 0.0
    var httpFloor = (cpuPerRequestMicros: 0.0, requestsPerSecond: 0.0)
    var floorSwitches = ProcessProbe.ContextSwitches(voluntary: 0, involuntary: 0)
    if rtt == 0 {
        let switchesBefore = childrenContextSwitches()
        kafkaFloor = try kcatFloor(sandbox, messages: count)
        say("floor: kcat consume | kcat produce: \(f(kafkaFloor, 2)) µs CPU per message")
        httpFloor = try h2loadFloor(sandbox, requests: count, payload: payload, connections: 2, streams: 100)
        say("floor: h2load (2 connections x 100 streams): \(f(httpFloor.cpuPerRequestMicros, 2)) µs CPU per request, \(f(httpFloor.requestsPerSecond, 0)) req/s")
        floorSwitches = childrenContextSwitches() - switchesBefore
        say("floor: kcat + h2load context switches per event, voluntary / involuntary: \(floorSwitches.perEvent(count))")
        sandbox.apns.resetObservations()
    } else {
        sandbox.apns.faults.latency = FaultInjector.Latency(rtt: .milliseconds(rtt))
    }

    let reader = try OutputReader(sandbox: sandbox, logger: logger)
    var tally = ResultTally(resultsTopic: options.topics.results, keepTimings: true)
    // Cross-check of the /proc figure: the relay's whole life, exited threads and shutdown included, from
    // getrusage once it is reaped (no other child of this process ends while it runs).
    let reapedBefore = childrenContextSwitches()
    let relay = try RelayUnderTest(sandbox)
    // The events already wait in Kafka, so the window starts with the relay, as its CPU figure does (the
    // start-up is in both).
    let switchesBefore = relay.probe.contextSwitches ?? .init(voluntary: 0, involuntary: 0)
    let started = ContinuousClock.now
    try await tally.collect(from: reader, untilResults: count, timeout: .seconds(900))
    let wall = ContinuousClock.now - started
    let cpu = relay.probe.cpuSeconds ?? 0
    let switches = (relay.probe.contextSwitches ?? switchesBefore) - switchesBefore
    let memory = relay.probe.memoryMiB ?? (0, 0)
    let statistics = sandbox.apns.statistics
    relay.stop()
    let lifetime = childrenContextSwitches() - reapedBefore
    await reader.close()

    let latencies = tally.timings.map { $0.completedAt - $0.receivedAt }.sorted()
    let rate = eventsPerSecond(tally, count)
    let delivered = tally.outcomes["delivered"] ?? 0
    say("relay: \(count) results (\(delivered) delivered, \(tally.duplicates) duplicates) in \(wall) wall incl. start-up and group join")
    say("relay: \(f(rate, 0)) events/s (first consume → last completion), latency p50 \(percentile(latencies, 0.5)) ms p99 \(percentile(latencies, 0.99)) ms")
    say("relay: CPU \(f(cpu, 2)) s total = \(f(cpu * 100_000 / Double(count), 2)) s per 100k events, RSS \(f(memory.rss)) MiB, peak \(f(memory.peak)) MiB")
    say("mock APNs: \(statistics.connectionsOpened) connections opened, \(statistics.requests) requests")
    say("relay: \(switches.voluntary) voluntary + \(switches.involuntary) involuntary context switches = \(switches.perEvent(count)) per event")
    say("relay: whole life incl. shutdown and exited threads (getrusage): \(lifetime.voluntary) voluntary + \(lifetime.involuntary) involuntary")
    let tag = rtt > 0 ? " @\(rtt)ms RTT, \(payload) B" : " (0 ms, \(payload) B)"
    if rtt == 0 {
        let floorPer100k = (kafkaFloor + httpFloor.cpuPerRequestMicros) * 100_000 / 1e6
        let relayPer100k = cpu * 100_000 / Double(count)
        row("e2e events/s" + tag, f(rate, 0), floor: "h2load \(f(httpFloor.requestsPerSecond, 0)) req/s")
        row("e2e CPU s/100k events" + tag, f(relayPer100k, 2), floor: "\(f(floorPer100k, 2)) (kcat \(f(kafkaFloor, 1)) + h2load \(f(httpFloor.cpuPerRequestMicros, 1)) µs/event)", ratio: f(relayPer100k / floorPer100k, 2))
        row("e2e latency p50/p99 ms" + tag, "\(percentile(latencies, 0.5)) / \(percentile(latencies, 0.99))")
        row("e2e peak RSS MiB" + tag, f(memory.peak))
        let floorTotal = Double(floorSwitches.voluntary + floorSwitches.involuntary)
        row("e2e context switches/event, voluntary / involuntary" + tag, switches.perEvent(count), floor: "kcat + h2load \(floorSwitches.perEvent(count))",
            ratio: floorTotal > 0 ? f(Double(switches.voluntary + switches.involuntary) / floorTotal, 2) : "")
    } else {
        // Floor: h2load over as many connections as the pool chose, same RTT, same payload.
        let connections = max(1, statistics.connectionsOpened)
        let floor = try h2loadFloor(sandbox, requests: min(count, 40_000), payload: payload, connections: connections, streams: 1000)
        say("floor: h2load \(connections) connections x 1000 streams at \(rtt) ms: \(f(floor.requestsPerSecond, 0)) req/s")
        row("e2e events/s" + tag, f(rate, 0), floor: "h2load \(f(floor.requestsPerSecond, 0)) req/s on \(connections) conn", ratio: f(rate / max(1, floor.requestsPerSecond), 2))
        row("e2e connections opened" + tag, "\(statistics.connectionsOpened)")
        row("e2e latency p50/p99 ms" + tag, "\(percentile(latencies, 0.5)) / \(percentile(latencies, 0.99))")
    }
    await sandbox.stop()
    if tally.distinctKeys < count { throw BenchmarkError("only \(tally.distinctKeys) of \(count) events have a result") }
}

func backpressure() async throws {
    let count = option("events", 60_000)
    let seconds = option("seconds", 30)
    var options = RelaySandbox.Options()
    options.partitions = 16
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    say("== memory under backpressure: \(count) events in Kafka, APNs withholds every reply for \(seconds) s")
    try await sandbox.produceKept(makeEvents(count, payload: 300))
    sandbox.apns.faults.withholdAllReplies = true
    let reader = try OutputReader(sandbox: sandbox, logger: logger)
    var tally = ResultTally(resultsTopic: options.topics.results)
    let relay = try RelayUnderTest(sandbox)
    var samples: [Double] = []
    let started = ContinuousClock.now
    while ContinuousClock.now - started < .seconds(seconds) {
        try await Task.sleep(for: .seconds(2))  // the sampling period
        let memory = relay.probe.memoryMiB ?? (0, 0)
        samples.append(memory.rss)
        say("t=\(Int((ContinuousClock.now - started).seconds)) s  RSS \(f(memory.rss)) MiB  peak \(f(memory.peak)) MiB  APNs requests held \(sandbox.apns.statistics.withheldReplies)")
    }
    sandbox.apns.faults.withholdAllReplies = false
    try await tally.collect(from: reader, expected: Set((0..<count).map { "e\($0)" }), timeout: .seconds(600))
    let peak = relay.probe.memoryMiB?.peak ?? 0
    relay.stop()
    await reader.close()
    await sandbox.stop()
    // Flat: the second half of the samples grows by less than 10 % over the first sample of that half.
    let half = Array(samples.suffix(samples.count / 2))
    let growth = (half.last ?? 0) - (half.first ?? 0)
    say("released: all \(count) events answered (\(tally.duplicates) duplicates); relay peak RSS \(f(peak)) MiB")
    row("peak RSS MiB, \(count) events waiting (APNs withholds replies)", f(peak))
    row("backpressure RSS MiB over \(seconds) s (every 2 s)", samples.map { f($0, 0) }.joined(separator: " "), floor: "growth in 2nd half \(f(growth)) MiB")
}


@main
struct EndToEndBenchmark {
    static func main() async {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .error
            return handler
        }
        let mode = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "throughput"
        do {
            switch mode {
            case "throughput": try await throughput()
            case "backpressure": try await backpressure()
            case "stages": try stages()
            case "paced": try await paced()
            case "slow-apns": try await slowAPNs()
            case "threads": try await threads()
            case "idle": try await idle()
            case "allocations": try await allocations()
            case "partitions": try await partitions()
            case "lanes": try await lanes()
            case "tracing": try await tracingCost()
            case "exactly-once": try await exactlyOnceCost()
            default: throw BenchmarkError("unknown mode \(mode): throughput, backpressure, stages, paced, slow-apns, threads, idle, allocations, partitions, lanes, tracing or exactly-once")
            }
        } catch {
            print("error: \(error)")
            exit(1)
        }
    }
}
