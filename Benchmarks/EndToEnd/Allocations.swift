import Foundation
import RelaySandbox

// What an event costs in calls, at full speed: a relay run of its own with Benchmarks/AllocationCounter preloaded
// (counting every retain and copy costs CPU, so no other row's relay carries it).

/// `allocations [--events N] [--partitions P] [--payload BYTES] [--preload PATH]`: per event over N (100k) events,
/// start-up excluded, in total and by thread (which is by stage): heap allocations (malloc, calloc, realloc,
/// posix_memalign, aligned_alloc), Swift retains and releases, clock reads (clock_gettime) and copies (memcpy,
/// memmove, with their bytes).
func allocations() async throws {
    let count = option("events", 100_000)
    let payload = option("payload", 300)
    let preload = option("preload") ?? ProcessInfo.processInfo.environment["BENCH_ALLOC_PRELOAD"]
        ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("libbench-allocation-counter.so").path
    guard FileManager.default.fileExists(atPath: preload) else {
        throw BenchmarkError("no allocation counter at \(preload); Benchmarks/end-to-end.sh builds it (gcc -O2 -fno-omit-frame-pointer -shared -fPIC -o \(preload) Benchmarks/AllocationCounter/allocation-counter.c -ldl)")
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
    let allocationKinds = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc"]
    let total = allocationKinds.reduce(0) { $0 + (calls[$1] ?? 0) }
    let perEvent = Double(total) / Double(count)
    let breakdown = allocationKinds.map { "\($0) \(f(Double(calls[$0] ?? 0) / Double(count), 1))" }.joined(separator: ", ")
    say("relay: \(total) allocations for \(count) events = \(f(perEvent, 1)) per event (\(breakdown)); \(tally.duplicates) duplicate results")
    row("allocations per event (0 ms, \(payload) B)", f(perEvent, 1))
    let perEventOf = { (kind: String) in Double(calls[kind] ?? 0) / Double(count) }
    if calls["retain"] != nil {
        let traffic = perEventOf("retain") + perEventOf("release")
        say("relay: \(f(traffic, 1)) retains + releases per event (swift_retain \(f(perEventOf("retain"), 1)), swift_release \(f(perEventOf("release"), 1)))")
        row("retains + releases per event (0 ms, \(payload) B)", f(traffic, 1))
    } else {
        say("relay: retains and releases not counted (the counter found no Swift runtime hooks in the relay)")
    }
    let copyBytes = perEventOf("copy_bytes")
    say("relay: \(f(perEventOf("clock"), 1)) clock reads and \(f(perEventOf("copy"), 1)) copies (memcpy, memmove) of \(f(copyBytes, 0)) bytes per event")
    row("clock reads per event (0 ms, \(payload) B)", f(perEventOf("clock"), 1))
    row("copies per event, memcpy + memmove (0 ms, \(payload) B)", "\(f(perEventOf("copy"), 1)) (\(f(copyBytes, 0)) B)")
    // By stage: each runs on threads of its own.
    // (By thread id: a thread that exited since is named `exited` in the second dump.)
    let beforeByID = Dictionary(before.threads.map { ($0.key.id, $0.value) }, uniquingKeysWith: +)
    var byStage: [String: ThreadCounts] = [:]
    for (thread, counted) in after.threads {
        byStage[AllocationStage(thread: thread.name).rawValue, default: ThreadCounts()] += counted - (beforeByID[thread.id] ?? ThreadCounts())
    }
    // Each stage's figure beside its budget (`AllocationStage.budget`); the ratio column names the stages over it.
    func stages(_ figure: KeyPath<ThreadCounts, Int>, label: String, budget: KeyPath<StageBudget, Double>?) {
        var over: [String] = []
        let parts = AllocationStage.allCases.compactMap { stage -> String? in
            let measured = byStage[stage.rawValue].map { Double($0[keyPath: figure]) / Double(count) } ?? 0
            guard let budget else { return byStage[stage.rawValue] == nil ? nil : "\(stage.rawValue) \(f(measured, 1))" }
            let allowed = stage.budget[keyPath: budget]
            if measured > allowed + 0.05 { over.append(stage.shortName) }
            return "\(stage.rawValue) \(f(measured, 1)) of \(f(allowed, 1))"
        }
        say("relay \(label) per event by thread: " + parts.joined(separator: ", "))
        let total = budget.map { b in AllocationStage.allCases.reduce(0) { $0 + $1.budget[keyPath: b] } }
        row("\(label) per event by thread (0 ms, \(payload) B)", parts.joined(separator: "; "),
            floor: total.map { "budget \(f($0, 1)) per event" } ?? "",
            ratio: budget == nil ? "" : over.isEmpty ? "within budget" : "over: " + over.joined(separator: ", "))
    }
    stages(\.allocations, label: "allocations", budget: \.allocations)
    if calls["retain"] != nil { stages(\.referenceCounting, label: "retains + releases", budget: \.referenceCounting) }
    stages(\.clocks, label: "clock reads", budget: \.clocks)
    stages(\.copies, label: "copies", budget: nil)
    let others = Set(after.threads.keys.filter { AllocationStage(thread: $0.name) == .other }.map(\.name)).sorted()
    if !others.isEmpty { say("  (other: threads named \(others.joined(separator: ", ")))") }
}

/// What the counter counted on one thread.
struct ThreadCounts: Equatable {
    var allocations = 0
    var retains = 0
    var releases = 0
    var clocks = 0
    var copies = 0
    var copiedBytes = 0

    var referenceCounting: Int { retains + releases }

    static func + (a: ThreadCounts, b: ThreadCounts) -> ThreadCounts {
        ThreadCounts(allocations: a.allocations + b.allocations, retains: a.retains + b.retains, releases: a.releases + b.releases,
                     clocks: a.clocks + b.clocks, copies: a.copies + b.copies, copiedBytes: a.copiedBytes + b.copiedBytes)
    }

    static func - (a: ThreadCounts, b: ThreadCounts) -> ThreadCounts {
        ThreadCounts(allocations: a.allocations - b.allocations, retains: a.retains - b.retains, releases: a.releases - b.releases,
                     clocks: a.clocks - b.clocks, copies: a.copies - b.copies, copiedBytes: a.copiedBytes - b.copiedBytes)
    }

    static func += (a: inout ThreadCounts, b: ThreadCounts) { a = a + b }
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

    /// What an event may cost in this stage (#39's budget, per event at full speed, 300-B events): together
    /// at most 8 allocations, 40 retains and releases (about 3 % of the relay's CPU at ~10 ns each) and 8.5
    /// clock reads (the relay's own one per stage hand-off, and librdkafka's). Benchmarks/README.md gives the
    /// reasons, stage by stage.
    var budget: StageBudget {
        switch self {
        // The record's copy (one buffer: key, value and headers); librdkafka's two as a message is taken (its
        // header list, parsed for every record). Reads no clock.
        case .intake: StageBudget(allocations: 3, referenceCounting: 4, clocks: 0)
        // The in-flight event and the attempt's stream request; admission's wall clock and the attempt's start.
        case .triage: StageBudget(allocations: 2, referenceCounting: 12, clocks: 2)
        // librdkafka's copy of the produced result, and half an allocation for what grows now and then (nghttp2's
        // pool, a turn's arrays); the answer's one reading (the result's wall time: the removal screen counts the
        // answer at its attempt's start), and librdkafka's two as it enqueues the result (its enqueue time and the
        // message's timestamp).
        case .apns: StageBudget(allocations: 1.5, referenceCounting: 16, clocks: 3)
        // Nothing allocated for a delivery report or the frontier; publication's latency reading.
        case .reports: StageBudget(allocations: 0, referenceCounting: 8, clocks: 1)
        // The fetched message as the broker thread parses it; the broker threads' own readings, per wake-up
        // rather than per event (0.8–2.1 per event across runs of the same build).
        case .librdkafka: StageBudget(allocations: 1, referenceCounting: 0, clocks: 2.5)
        // Threads of no stage (the main thread, threads that exited before the dump): nothing per event.
        case .other: StageBudget(allocations: 0.5, referenceCounting: 0, clocks: 0)
        }
    }

    /// The stage's name in a short list.
    var shortName: String {
        switch self {
        case .intake: "Kafka poll"
        case .triage: "Swift executor"
        case .apns: "APNs loops"
        case .reports: "producer poll"
        case .librdkafka: "librdkafka"
        case .other: "other"
        }
    }
}

/// What an event may cost in one stage (`AllocationStage.budget`).
struct StageBudget {
    var allocations: Double
    var referenceCounting: Double
    var clocks: Double
}

/// A thread of the relay, as the counter names it.
struct CountedThread: Hashable {
    var id: Int
    var name: String
}

/// The relay's allocation counts now, by kind and by thread: SIGUSR2 has the preloaded counter write them to
/// `file`, which it renames into place complete; waits for it with a deadline.
func allocationCounts(of relay: RelayUnderTest, file: String) async throws -> (kinds: [String: Int], threads: [CountedThread: ThreadCounts]) {
    try? FileManager.default.removeItem(atPath: file)
    guard kill(relay.process.processIdentifier, SIGUSR2) == 0 else { throw BenchmarkError("kill SIGUSR2: errno \(errno)") }
    try await waitUntil("allocation counts in \(file) after SIGUSR2", timeout: .seconds(10), interval: .milliseconds(5)) {
        FileManager.default.fileExists(atPath: file)
    }
    let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
    // `malloc=N … aligned_alloc=N [retain=N release=N] clock=N copy=N copy_bytes=N`, then per thread
    // `thread <tid> <name> <allocations> <retains> <releases> <clocks> <copies> <copied bytes>` (allocation-counter.c).
    let kinds = Dictionary(uniqueKeysWithValues: (lines.first ?? "").split(whereSeparator: \.isWhitespace).compactMap { pair -> (String, Int)? in
        let parts = pair.split(separator: "=")
        guard parts.count == 2, let value = Int(parts[1]) else { return nil }
        return (String(parts[0]), value)
    })
    var threads: [CountedThread: ThreadCounts] = [:]
    for line in lines.dropFirst() {
        let fields = line.split(separator: " ")
        guard fields.count == 9, fields[0] == "thread", let id = Int(fields[1]) else { continue }
        let numbers = fields[3...].compactMap { Int($0) }
        guard numbers.count == 6 else { continue }
        threads[CountedThread(id: id, name: String(fields[2])), default: ThreadCounts()] += ThreadCounts(
            allocations: numbers[0], retains: numbers[1], releases: numbers[2], clocks: numbers[3], copies: numbers[4], copiedBytes: numbers[5])
    }
    return (kinds, threads)
}
