import Foundation
import RelaySandbox

// Heap allocations per event at full speed: a relay run of its own with Benchmarks/AllocationCounter
// preloaded (an atomic increment per call on a shared counter costs CPU, so no other row's relay carries it).

/// `allocations [--events N] [--partitions P] [--payload BYTES] [--preload PATH]`: malloc, calloc, realloc,
/// posix_memalign and aligned_alloc calls of the relay per event, over N (100k) events, start-up excluded.
func allocations() async throws {
    let count = option("events", 100_000)
    let payload = option("payload", 300)
    let preload = option("preload") ?? ProcessInfo.processInfo.environment["BENCH_ALLOC_PRELOAD"]
        ?? URL(fileURLWithPath: relayBinary).deletingLastPathComponent().appendingPathComponent("libbench-allocation-counter.so").path
    guard FileManager.default.fileExists(atPath: preload) else {
        throw BenchmarkError("no allocation counter at \(preload); Benchmarks/end-to-end.sh builds it (gcc -O2 -shared -fPIC -o \(preload) Benchmarks/AllocationCounter/allocation-counter.c -ldl)")
    }
    var options = RelaySandbox.Options()
    options.partitions = option("partitions", 32)
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    say("== allocations (0 ms, \(payload) B): \(count) events, relay with \(preload) preloaded")
    let events = makeEvents(count, payload: payload)
    let reader = try OutputReader(sandbox: sandbox, logger: logger)
    var tally = ResultTally(resultsTopic: options.topics.results)
    let countsFile = NSTemporaryDirectory() + "bench-allocations-\(UUID().uuidString).txt"
    defer { try? FileManager.default.removeItem(atPath: countsFile) }
    let relay = try RelayUnderTest(sandbox, extra: ["LD_PRELOAD": preload, "BENCH_ALLOC_COUNTS_FILE": countsFile])
    // Warm-up: a first event has the relay join its group and open a connection, so start-up allocations
    // (configuration, TLS, librdkafka's clients) stay out of the window. Its result also says the counter's
    // constructor has run long ago: SIGUSR2 before it had installed its handler would kill the relay.
    try await sandbox.produce([(key: "warm-up", value: SampleEvents.event(id: "warm-up", deviceToken: SampleEvents.token(0), payload: SampleEvents.payload(bytes: payload)))])
    try await tally.collect(from: reader, untilResults: 1, timeout: .seconds(60))
    let before = try await allocationCounts(of: relay, file: countsFile)
    // Produced while the relay runs (the throughput row's events wait in Kafka before it starts): the sandbox's
    // producer is several times faster than the relay, so the relay still works through a backlog.
    let producing = ContinuousClock.now
    try await sandbox.produce(events)
    say("produced \(count) events in \(ContinuousClock.now - producing) while the relay consumed")
    try await tally.collect(from: reader, untilResults: count + 1, timeout: .seconds(900))
    let after = try await allocationCounts(of: relay, file: countsFile)
    relay.stop()
    await reader.close()
    await sandbox.stop()
    let calls = after.merging(before) { $0 - $1 }
    let total = calls.values.reduce(0, +)
    let perEvent = Double(total) / Double(count)
    let breakdown = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc"]
        .map { "\($0) \(f(Double(calls[$0] ?? 0) / Double(count), 1))" }.joined(separator: ", ")
    say("relay: \(total) allocations for \(count) events = \(f(perEvent, 1)) per event (\(breakdown)); \(tally.duplicates) duplicate results")
    row("allocations per event (0 ms, \(payload) B)", f(perEvent, 1))
}

/// The relay's allocation counts now: SIGUSR2 has the preloaded counter write them to `file`, which it
/// renames into place complete; waits for it with a deadline.
func allocationCounts(of relay: RelayUnderTest, file: String) async throws -> [String: Int] {
    try? FileManager.default.removeItem(atPath: file)
    guard kill(relay.process.processIdentifier, SIGUSR2) == 0 else { throw BenchmarkError("kill SIGUSR2: errno \(errno)") }
    try await waitUntil("allocation counts in \(file) after SIGUSR2", timeout: .seconds(10), interval: .milliseconds(5)) {
        FileManager.default.fileExists(atPath: file)
    }
    let line = try String(contentsOfFile: file, encoding: .utf8)
    // `malloc=N calloc=N realloc=N posix_memalign=N aligned_alloc=N`
    return Dictionary(uniqueKeysWithValues: line.split(whereSeparator: \.isWhitespace).compactMap { pair -> (String, Int)? in
        let parts = pair.split(separator: "=")
        guard parts.count == 2, let value = Int(parts[1]) else { return nil }
        return (String(parts[0]), value)
    })
}
