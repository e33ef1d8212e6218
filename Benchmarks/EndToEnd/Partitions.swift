import Foundation
import RelaySandbox

/// `partitions [--runs 100000x16,100000x128,1000000x128] [--payload B]`: the Kafka side as the work grows.
/// For each run (events × partitions, a fresh sandbox, default relay configuration, the fast mock APNs):
/// relay CPU per event, context switches per event, peak RSS and librdkafka threads' share of the relay's
/// CPU, beside kcat consuming the same topic and producing every record to another (the floor). Then the
/// figures the partition count and the backlog must leave flat: CPU and switches of the most partitions ÷
/// the fewest (same events), and CPU of the biggest backlog ÷ the smallest (same partitions).
func partitions() async throws {
    let payload = option("payload", 300)
    let runs = (option("runs") ?? "100000x16,100000x128,1000000x128").split(separator: ",").map { spec in
        let parts = spec.split(separator: "x").compactMap { Int($0) }
        return (events: parts.first ?? 100_000, partitions: parts.count > 1 ? parts[1] : 16)
    }
    var results: [(events: Int, partitions: Int, cpu: Double, switches: Double, peak: Double)] = []
    for run in runs {
        var options = RelaySandbox.Options()
        options.partitions = run.partitions
        let sandbox = try await RelaySandbox(options: options, logger: logger)
        let label = "\(run.events / 1000)k events, \(run.partitions) partitions"
        say("== partitions: \(label), \(payload) B payloads; producing…")
        let events = makeEvents(run.events, payload: payload)
        try await sandbox.produceKept(events)

        let floorBefore = childrenContextSwitches()
        let kcat = try kcatFloor(sandbox, messages: run.events)
        let floorSwitches = childrenContextSwitches() - floorBefore
        say("floor: kcat consume | kcat produce: \(f(kcat, 2)) µs CPU and \(floorSwitches.perEvent(run.events)) context switches per message")

        let reader = try OutputReader(sandbox: sandbox, logger: logger)
        var tally = ResultTally(resultsTopic: options.topics.results, keepTimings: true)
        let relay = try RelayUnderTest(sandbox)
        let switchesBefore = relay.probe.contextSwitches ?? .init(voluntary: 0, involuntary: 0)
        try await tally.collect(from: reader, untilResults: run.events, timeout: .seconds(900))
        let cpu = relay.probe.cpuSeconds ?? 0
        let threads = relay.probe.threadCPUSeconds ?? [:]
        let switches = (relay.probe.contextSwitches ?? switchesBefore) - switchesBefore
        let memory = relay.probe.memoryMiB ?? (0, 0)
        relay.stop()
        await reader.close()
        await sandbox.stop()
        if tally.distinctKeys < run.events { throw BenchmarkError("only \(tally.distinctKeys) of \(run.events) events have a result") }

        let rate = eventsPerSecond(tally, run.events)
        let perEvent = cpu * 1e6 / Double(run.events)
        let switchesPerEvent = Double(switches.voluntary + switches.involuntary) / Double(run.events)
        let floorSwitchesPerEvent = Double(floorSwitches.voluntary + floorSwitches.involuntary) / Double(run.events)
        let librdkafka = threads.filter { $0.key.hasPrefix("rdk:") }.values.reduce(0, +)
        let share = cpu > 0 ? librdkafka / cpu * 100 : 0
        say("relay: \(f(rate, 0)) events/s, \(f(perEvent)) µs CPU, \(switches.perEvent(run.events)) context switches per event, peak RSS \(f(memory.peak)) MiB; librdkafka threads \(f(share, 0)) % of its CPU")
        row("kafka \(label): relay CPU µs/event", f(perEvent), floor: "kcat \(f(kcat)) µs/event", ratio: f(perEvent / kcat, 2))
        row("kafka \(label): context switches/event", f(switchesPerEvent, 2), floor: "kcat \(f(floorSwitchesPerEvent, 2))",
            ratio: floorSwitchesPerEvent > 0 ? f(switchesPerEvent / floorSwitchesPerEvent, 2) : "")
        row("kafka \(label): events/s", f(rate, 0))
        row("kafka \(label): peak RSS MiB", f(memory.peak))
        let librdkafkaPerEvent = librdkafka * 1e6 / Double(run.events)
        row("kafka \(label): relay's librdkafka threads µs/event (share of its CPU)", "\(f(librdkafkaPerEvent)) (\(f(share, 0)) %)",
            floor: "kcat \(f(kcat)) µs/event", ratio: f(librdkafkaPerEvent / kcat, 2))
        results.append((run.events, run.partitions, perEvent, switchesPerEvent, memory.peak))
    }
    // Same events, fewest and most partitions; same partitions, smallest and biggest backlog.
    let fewestEvents = results.map(\.events).min() ?? 0
    let sameEvents = results.filter { $0.events == fewestEvents }.sorted { $0.partitions < $1.partitions }
    if let few = sameEvents.first, let many = sameEvents.last, many.partitions > few.partitions {
        row("kafka CPU/event, \(many.partitions) ÷ \(few.partitions) partitions (\(fewestEvents / 1000)k events)", f(many.cpu / few.cpu, 2), floor: "target ≤ 1.1")
        row("kafka context switches/event, \(many.partitions) ÷ \(few.partitions) partitions", f(many.switches / max(0.0001, few.switches), 2), floor: "target ≤ 1.2")
    }
    let mostPartitions = results.map(\.partitions).max() ?? 0
    let samePartitions = results.filter { $0.partitions == mostPartitions }.sorted { $0.events < $1.events }
    if let small = samePartitions.first, let big = samePartitions.last, big.events > small.events {
        row("kafka CPU/event, \(big.events / 1000)k ÷ \(small.events / 1000)k backlog (\(mostPartitions) partitions)", f(big.cpu / small.cpu, 2), floor: "target ≤ 1.1")
    }
}
