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
        ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("libbench-allocation-counter.so").path
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
    try await sandbox.produceKept([(key: "warm-up", value: SampleEvents.event(id: "warm-up", deviceToken: SampleEvents.token(0), payload: SampleEvents.payload(bytes: payload)))])
    try await tally.collect(from: reader, untilResults: 1, timeout: .seconds(60))
    let before = try await allocationCounts(of: relay, file: countsFile)
    // Produced while the relay runs (the throughput row's events wait in Kafka before it starts): the sandbox's
    // producer is several times faster than the relay, so the relay still works through a backlog.
    let producing = ContinuousClock.now
    try await sandbox.produceKept(events)
    say("produced \(count) events in \(ContinuousClock.now - producing) while the relay consumed")
    try await tally.collect(from: reader, untilResults: count + 1, timeout: .seconds(900))
    let after = try await allocationCounts(of: relay, file: countsFile)
    relay.stop()
    await reader.close()
    await sandbox.stop()
    let calls = after.kinds.merging(before.kinds) { $0 - $1 }
    let total = calls.values.reduce(0, +)
    let perEvent = Double(total) / Double(count)
    let breakdown = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc"]
        .map { "\($0) \(f(Double(calls[$0] ?? 0) / Double(count), 1))" }.joined(separator: ", ")
    say("relay: \(total) allocations for \(count) events = \(f(perEvent, 1)) per event (\(breakdown)); \(tally.duplicates) duplicate results")
    row("allocations per event (0 ms, \(payload) B)", f(perEvent, 1))
    // By stage: each runs on threads of its own.
    // (By thread id: a thread that exited since is named `exited` in the second dump.)
    let beforeByID = Dictionary(before.threads.map { ($0.key.id, $0.value) }, uniquingKeysWith: +)
    var byStage: [String: Int] = [:]
    for (thread, calls) in after.threads {
        byStage[AllocationStage(thread: thread.name).rawValue, default: 0] += calls - (beforeByID[thread.id] ?? 0)
    }
    let stages = AllocationStage.allCases.compactMap { stage in
        byStage[stage.rawValue].map { "\(stage.rawValue) \(f(Double($0) / Double(count), 1))" }
    }
    say("relay allocations per event by thread: " + stages.joined(separator: ", "))
    let others = Set(after.threads.keys.filter { AllocationStage(thread: $0.name) == .other }.map(\.name)).sorted()
    if !others.isEmpty { say("  (other: threads named \(others.joined(separator: ", ")))") }
    row("allocations per event by thread (0 ms, \(payload) B)", stages.joined(separator: "; "))
}

/// The relay's threads, by the stage of an event they run.
enum AllocationStage: String, CaseIterable {
    case intake = "Kafka poll (record copies)"
    case triage = "Swift executor (admission, decode, triage, request)"
    case apns = "APNs loops (HTTP/2, answers, results, produce)"
    case reports = "producer poll (delivery reports, offsets)"
    case librdkafka = "librdkafka's own threads"
    /// The main thread, threads that exited before the dump, and any other.
    case other = "other"

    init(thread name: String) {
        switch name {
        case "kafka-consumer": self = .intake
        case "kafka-producer": self = .reports
        case let name where name.hasPrefix("apns-loop"): self = .apns
        case let name where name.hasPrefix("rdk:"): self = .librdkafka
        // libdispatch's worker threads, which run Swift's global executor ("com.apple.root.default-qos" and
        // its overcommit queue, cut to their last 15 characters).
        case let name where name.contains("qos"): self = .triage
        default: self = .other
        }
    }
}

/// A thread of the relay, as the counter names it.
struct CountedThread: Hashable {
    var id: Int
    var name: String
}

/// The relay's allocation counts now, by kind and by thread: SIGUSR2 has the preloaded counter write them to
/// `file`, which it renames into place complete; waits for it with a deadline.
func allocationCounts(of relay: RelayUnderTest, file: String) async throws -> (kinds: [String: Int], threads: [CountedThread: Int]) {
    try? FileManager.default.removeItem(atPath: file)
    guard kill(relay.process.processIdentifier, SIGUSR2) == 0 else { throw BenchmarkError("kill SIGUSR2: errno \(errno)") }
    try await waitUntil("allocation counts in \(file) after SIGUSR2", timeout: .seconds(10), interval: .milliseconds(5)) {
        FileManager.default.fileExists(atPath: file)
    }
    let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
    // `malloc=N calloc=N realloc=N posix_memalign=N aligned_alloc=N`, then `thread <tid> <name> N` per thread.
    let kinds = Dictionary(uniqueKeysWithValues: (lines.first ?? "").split(whereSeparator: \.isWhitespace).compactMap { pair -> (String, Int)? in
        let parts = pair.split(separator: "=")
        guard parts.count == 2, let value = Int(parts[1]) else { return nil }
        return (String(parts[0]), value)
    })
    var threads: [CountedThread: Int] = [:]
    for line in lines.dropFirst() {
        let fields = line.split(separator: " ")
        guard fields.count == 4, fields[0] == "thread", let id = Int(fields[1]), let calls = Int(fields[3]) else { continue }
        threads[CountedThread(id: id, name: String(fields[2])), default: 0] += calls
    }
    return (kinds, threads)
}
