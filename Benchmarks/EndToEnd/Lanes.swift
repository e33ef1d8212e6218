import APNsMock
import Foundation
import Kafka
import RelaySandbox
import ServiceSupport

/// `lanes [--backlog N] [--app-backlog N] [--seconds S] [--answers A] [--rate R]`: priority lanes (issue #24).
/// A mock APNs answering at most A pushes a second (the relay is faster than APNs, as in production), a
/// backlog waiting in Kafka, and a trickle of R events a second for S seconds once the backlog flows:
///
/// 1. bulk alone: N bulk events, lanes configured, no trickle (bulk's rate: the reference);
/// 2. lanes: the same, the trickle in the urgent topic (`kafka.topics.urgent`);
/// 3. one lane (before): the trickle's topic read as one more bulk input (today's behaviour without the key);
/// 4. apps: one lane, app A's backlog of `app-backlog` in the input topic, app B's trickle in a second input
///    topic of the same lane. (Were B's events produced to A's topic, they would sit behind A's backlog in
///    each partition, and Kafka hands a partition's records out in order: the relay would take B's whole
///    trickle at once when it reached the end of A's backlog, a backlog of B's own. Fairness between apps
///    is the relay's for what it has taken; what waits in one partition is the partition's order.)
///
/// Each trickle event's time from consume to result (the result's `completedAt − receivedAt`) and from
/// produce to result (the benchmark's clock at the send, to `completedAt`), and bulk's results per second
/// while the trickle flows. librdkafka's mock broker holds a fetch that finds nothing for `fetch.wait.max.ms`
/// (500 ms) where a real broker answers when data arrives; every run here uses 10 ms, as a broker would
/// behave (see `paced`).
func lanes() async throws {
    let backlog = option("backlog", 200_000)
    let appBacklog = option("app-backlog", 100_000)
    let seconds = option("seconds", 20)
    let answers = option("answers", 1500)
    let rate = option("rate", 20)
    say("== lanes: mock APNs at \(answers) answers/s; \(backlog / 1000)k bulk backlog; a trickle of \(rate)/s for \(seconds) s")

    // `--only apps` (or another scenario's name) runs one scenario, to watch it (BENCH_RELAY_ADMIN_PORT).
    if let only = option("only"), let scenario = LaneScenario.allCases.first(where: { "\($0)" == only }) {
        _ = try await laneRun(scenario, backlog: scenario == .apps ? appBacklog : backlog, seconds: seconds, answers: answers, rate: rate)
        return
    }
    let alone = try await laneRun(.bulkAlone, backlog: backlog, seconds: seconds, answers: answers, rate: rate)
    let withLanes = try await laneRun(.lanes, backlog: backlog, seconds: seconds, answers: answers, rate: rate)
    let oneLane = try await laneRun(.oneLane, backlog: backlog, seconds: seconds, answers: answers, rate: rate)
    let apps = try await laneRun(.apps, backlog: appBacklog, seconds: seconds, answers: answers, rate: rate)

    func latencies(_ run: LaneRun) -> String {
        "p50/p99/max \(run.consume.p50)/\(run.consume.p99)/\(run.consume.max) ms consume → result, \(run.produce.p50)/\(run.produce.p99)/\(run.produce.max) ms produce → result"
            + (run.missing > 0 ? "; \(run.missing) of \(run.trickled) without a result in time" : "")
    }
    say("lanes: urgent \(latencies(withLanes))")
    say("lanes: one lane (before) \(latencies(oneLane))")
    say("lanes: app B behind app A's backlog \(latencies(apps))")
    say("lanes: bulk \(f(alone.bulkRate, 0))/s alone, \(f(withLanes.bulkRate, 0))/s while urgent flows")
    row("lanes (\(backlog / 1000)k bulk backlog, urgent \(rate)/s): urgent p50/p99/max ms, consume → result",
        "\(withLanes.consume.p50) / \(withLanes.consume.p99) / \(withLanes.consume.max)", floor: "target p99 ≤ 50")
    row("lanes: urgent p50/p99/max ms, produce → result", "\(withLanes.produce.p50) / \(withLanes.produce.p99) / \(withLanes.produce.max)")
    row("lanes, before (urgent topic read as bulk): p50/p99/max ms, consume → result",
        "\(oneLane.consume.p50) / \(oneLane.consume.p99) / \(oneLane.consume.max)" + (oneLane.missing > 0 ? " (\(oneLane.missing) unanswered)" : ""))
    row("lanes, before: p50/p99/max ms, produce → result",
        "\(oneLane.produce.p50) / \(oneLane.produce.p99) / \(oneLane.produce.max)" + (oneLane.missing > 0 ? " (\(oneLane.missing) unanswered)" : ""))
    row("lanes: one lane, app B (\(rate)/s, own topic) beside app A's \(appBacklog / 1000)k backlog: p50/p99/max ms, consume → result",
        "\(apps.consume.p50) / \(apps.consume.p99) / \(apps.consume.max)", floor: "target p99 ≤ 100")
    row("lanes: app B p50/p99/max ms, produce → result", "\(apps.produce.p50) / \(apps.produce.p99) / \(apps.produce.max)")
    row("lanes: bulk events/s while urgent flows", f(withLanes.bulkRate, 0), floor: "bulk alone \(f(alone.bulkRate, 0))",
        ratio: alone.bulkRate > 0 ? f(withLanes.bulkRate / alone.bulkRate, 3) : "")
}

private enum LaneScenario: String, CaseIterable {
    case bulkAlone = "bulk alone"
    case lanes = "lanes"
    case oneLane = "one lane"
    case apps = "apps in one lane"
}

private struct Percentiles {
    var p50: Int64 = 0, p99: Int64 = 0, max: Int64 = 0
    init(_ values: [Int64]) {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return }
        p50 = percentile(sorted, 0.5)
        p99 = percentile(sorted, 0.99)
        max = sorted.last!
    }
}

private struct LaneRun {
    var consume: Percentiles
    var produce: Percentiles
    var trickled: Int
    var missing: Int
    /// Backlog results per second while the trickle flowed (or over the same window without one).
    var bulkRate: Double
}

private func laneRun(_ scenario: LaneScenario, backlog: Int, seconds: Int, answers: Int, rate: Int) async throws -> LaneRun {
    let urgentTopic = "apns-notifications-urgent"
    let appBTopic = "apns-notifications-app-b"
    var options = RelaySandbox.Options()
    options.partitions = 32  // 200k events on 16 partitions is over the mock's 5 MiB per partition (produceKept)
    switch scenario {
    case .bulkAlone, .lanes: options.topics.urgent = [urgentTopic]
    case .oneLane: options.topics.input.append(urgentTopic)
    case .apps: options.topics.input.append(appBTopic)
    }
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    let body = SampleEvents.payload(bytes: option("payload", 300))
    let events = (0..<backlog).map { n in
        (key: "b\(n)", value: SampleEvents.event(id: "b\(n)", deviceToken: SampleEvents.token(n), topic: "com.example.a", payload: body))
    }
    try await sandbox.produceKept(events)
    sandbox.apns.faults.latency = FaultInjector.Latency(rtt: .milliseconds(5), answersPerSecond: answers)
    let reader = try OutputReader(sandbox: sandbox, logger: logger)
    let relay = try RelayUnderTest(sandbox, extra: ["APNS_RELAY_KAFKA_CONSUMER_PROPERTIES": "fetch.wait.max.ms=10"])

    // Warm-up: the group joined, connections open, the adaptive limit settled on APNs' rate.
    var first: ContinuousClock.Instant?
    _ = try await reader.collect(timeout: .seconds(120)) { records in
        if first == nil, !records.isEmpty { first = .now }
        return first.map { ContinuousClock.now - $0 >= .seconds(5) } ?? false
    }

    // The trickle, from a producer of its own that sends at once (no linger).
    let trickleTopic = scenario == .apps ? appBTopic : urgentTopic
    let trickleApp = scenario == .apps ? "com.example.b" : "com.example.a"
    let sentAt = BlockingMutex<[String: Int64]>([:])
    /// How long Kafka took to acknowledge each trickle record (the produce side of produce → result).
    let acked = BlockingMutex<[Int64]>([])
    let total = scenario == .bulkAlone ? 0 : rate * seconds
    var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: [sandbox.bootstrapServers])
    producerConfiguration.clientID = "bench-trickle"
    producerConfiguration.linger = .zero
    let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
    try producer.start()
    let windowStart = Int64(Date().timeIntervalSince1970 * 1000)
    let trickleDone = Flag()
    let trickle = Task {
        defer { trickleDone.set() }
        let start = ContinuousClock.now
        for n in 0..<total {
            try await Task.sleep(until: start + .milliseconds(1000 * n / rate), clock: .continuous)  // the pacing
            let key = "t\(n)"
            let value = SampleEvents.event(id: key, deviceToken: SampleEvents.token(5_000_000 + n), topic: trickleApp, payload: body)
            sentAt.withLock { $0[key] = Int64(Date().timeIntervalSince1970 * 1000) }
            let sent = Int64(Date().timeIntervalSince1970 * 1000)
            try producer.produce(topic: trickleTopic, key: Array(key.utf8), value: value) { _ in
                acked.withLock { $0.append(Int64(Date().timeIntervalSince1970 * 1000) - sent) }
            }
        }
        if total == 0 { try await Task.sleep(for: .seconds(seconds)) }  // the window, without a trickle
    }

    // Results until every trickle event has one (bounded: one lane may take minutes), reading as they come.
    var consume: [Int64] = []
    var produce: [Int64] = []
    /// Per trickle event: (relay took it, completed), to split its time at the mock APNs' arrival.
    var trickleTimes: [Int: (received: Int64, completed: Int64)] = [:]
    var bulkInWindow = 0
    var windowEnd = Int64.max
    var seen = 0
    let deadline = ContinuousClock.now + .seconds(seconds) + .seconds(scenario == .oneLane ? 120 : 60)
    _ = try? await reader.collect(timeout: .seconds(seconds + 180)) { records in
        for record in records[seen...] {
            guard record.topic == options.topics.results, let json = record.json, let key = record.key.map({ String(decoding: $0, as: UTF8.self) }),
                let received = (json["receivedAt"] as? NSNumber)?.int64Value, let completed = (json["completedAt"] as? NSNumber)?.int64Value
            else { continue }
            if key.hasPrefix("t") {
                consume.append(completed - received)
                if let n = Int(key.dropFirst()) { trickleTimes[n] = (received, completed) }
                if let sent = sentAt.withLock({ $0[key] }) { produce.append(completed - sent) }
            } else if completed >= windowStart, completed <= windowEnd {
                bulkInWindow += 1
            }
        }
        seen = records.count
        if trickleDone.isSet, windowEnd == .max { windowEnd = Int64(Date().timeIntervalSince1970 * 1000) }
        return (trickleDone.isSet && consume.count >= total) || ContinuousClock.now >= deadline
    }
    try await trickle.value
    if windowEnd == .max { windowEnd = Int64(Date().timeIntervalSince1970 * 1000) }
    try await producer.close(timeout: .seconds(10))
    // Where the trickle's consume → result time went: in the relay (until the mock APNs got the request) and
    // at APNs (its queue, then the answer's way back).
    var inRelay: [Int64] = []
    var atAPNs: [Int64] = []
    let arrivals = Dictionary(sandbox.apns.acceptedNotifications.map { ($0.deviceToken, $0.receivedAtMilliseconds) }) { first, _ in first }
    for (n, times) in trickleTimes {
        guard let arrived = arrivals[SampleEvents.token(5_000_000 + n)] else { continue }
        inRelay.append(arrived - times.received)
        atAPNs.append(times.completed - arrived)
    }
    let ackTimes = Percentiles(acked.withLock { $0 })
    if total > 0 { say("lanes, \(scenario.rawValue): Kafka acknowledged the trickle's records in p50 \(ackTimes.p50) p99 \(ackTimes.p99) max \(ackTimes.max) ms") }
    if !inRelay.isEmpty {
        let relaySide = Percentiles(inRelay), apnsSide = Percentiles(atAPNs)
        say("lanes, \(scenario.rawValue): the trickle's consume → result split at the mock APNs' arrival (\(inRelay.count) events): in the relay p50 \(relaySide.p50) p99 \(relaySide.p99) ms, at APNs p50 \(apnsSide.p50) p99 \(apnsSide.p99) ms")
    }
    relay.stop()
    await reader.close()
    await sandbox.stop()
    let window = Double(max(1, windowEnd - windowStart)) / 1000
    let run = LaneRun(consume: Percentiles(consume), produce: Percentiles(produce), trickled: total, missing: total - consume.count,
                      bulkRate: Double(bulkInWindow) / window)
    say("lanes, \(scenario.rawValue): bulk \(f(run.bulkRate, 0))/s over \(f(window, 1)) s; trickle \(consume.count) of \(total) answered: consume → result p50 \(run.consume.p50) p99 \(run.consume.p99) max \(run.consume.max) ms, produce → result p50 \(run.produce.p50) p99 \(run.produce.p99) max \(run.produce.max) ms")
    return run
}
