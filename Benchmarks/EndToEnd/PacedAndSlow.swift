import APNsMock
import Foundation
import Kafka
import RelaySandbox

// Two benchmarks of the relay under conditions other than a backlog:
//  - paced: events arrive at a fixed rate (what a relay sees most of the day): CPU per event and latency;
//  - slow APNs: APNs answers at most N requests a second, a backlog of events: duplicate pushes.

/// Produces `rate` events a second for `seconds`, keys `p0`, `p1`, … (10 ms ticks, no task per record).
func producePaced(_ sandbox: RelaySandbox, rate: Int, seconds: Int, payload: Int) async throws -> Int {
    var configuration = KafkaProducerConfiguration(bootstrapServers: [sandbox.bootstrapServers])
    configuration.clientID = "bench-paced-producer"
    let producer = try KafkaProducer(configuration: configuration, logger: logger)
    try producer.start()
    let body = SampleEvents.payload(bytes: payload)
    let ticks = seconds * 100
    let start = ContinuousClock.now
    var produced = 0
    for tick in 0..<ticks {
        let due = rate * (tick + 1) / 100
        while produced < due {
            let value = SampleEvents.event(id: "p\(produced)", deviceToken: SampleEvents.token(produced), payload: body)
            try producer.produce(topic: sandbox.options.inputTopic, key: Array("p\(produced)".utf8), value: value) { _ in }
            produced += 1
        }
        try await Task.sleep(until: start + .milliseconds(10 * (tick + 1)), clock: .continuous)  // the pacing
    }
    try await producer.close(timeout: .seconds(10))
    return produced
}

/// `paced --rate R --seconds S [--full-speed-ns X]`: relay CPU per event and consume → result latency while
/// events arrive at R per second; with X (CPU ns per event at full speed, from `throughput`), their ratio.
func paced() async throws {
    let rate = option("rate", 1000)
    let seconds = option("seconds", 10)
    let fullSpeed = Double(option("full-speed-ns", 0)) / 1000
    // librdkafka's mock broker answers a fetch that found no data only once fetch.wait.max.ms has passed
    // (rd_kafka_mock_handle_Fetch: "If there was no data, delay up to MaxWait"), where a Kafka broker
    // answers as soon as data arrives. With the default 500 ms, records reach the relay in half-second
    // bursts at moderate rates, and the latency measured is the burst's. `--fetch-wait-ms` emulates a
    // broker's prompt answer (its own empty fetches cost the relay CPU, so the CPU rows keep the default).
    let fetchWait = option("fetch-wait-ms", 0)
    var options = RelaySandbox.Options()
    options.partitions = option("partitions", 32)
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    say("== paced: \(rate) events/s for \(seconds) s, 300 B, mock Kafka + mock APNs in the benchmark process")
    let reader = try OutputReader(sandbox: sandbox, logger: logger)
    var tally = ResultTally(resultsTopic: options.topics.results, keepTimings: true)
    let relay = try RelayUnderTest(sandbox, extra: fetchWait > 0 ? ["APNS_RELAY_KAFKA_CONSUMER_PROPERTIES": "fetch.wait.max.ms=\(fetchWait)"] : [:])
    // Warm-up: the relay joins its group and opens its connections on a first event.
    try await sandbox.produceKept([(key: "warm-up", value: SampleEvents.event(id: "warm-up", deviceToken: SampleEvents.token(0), payload: SampleEvents.payload(bytes: 300)))])
    try await tally.collect(from: reader, untilResults: 1, timeout: .seconds(60))
    let cpuBefore = relay.probe.cpuSeconds ?? 0
    let produced = try await producePaced(sandbox, rate: rate, seconds: seconds, payload: 300)
    try await tally.collect(from: reader, untilResults: produced + 1, timeout: .seconds(120))
    let cpu = (relay.probe.cpuSeconds ?? 0) - cpuBefore
    relay.stop()
    await reader.close()
    await sandbox.stop()
    let latencies = tally.timings.map { $0.completedAt - $0.receivedAt }.sorted()
    let perEvent = cpu * 1e6 / Double(produced)
    say("paced: \(produced) events at \(rate)/s: relay CPU \(f(cpu, 2)) s = \(f(perEvent)) µs/event; latency p50 \(percentile(latencies, 0.5)) ms p99 \(percentile(latencies, 0.99)) ms")
    row("paced \(rate)/s: CPU µs/event", f(perEvent), floor: fullSpeed > 0 ? "full speed \(f(fullSpeed)) µs/event" : "", ratio: fullSpeed > 0 ? f(perEvent / fullSpeed, 2) : "")
    let label = fetchWait > 0 ? "paced \(rate)/s, fetch.wait.max.ms=\(fetchWait)" : "paced \(rate)/s"
    row("\(label): latency p50/p99 ms (consume → result sent)", "\(percentile(latencies, 0.5)) / \(percentile(latencies, 0.99))")
}

/// `slow-apns --events N --answers A [--full-speed-ns X]`: APNs answers at most A requests a second; N events
/// wait in Kafka. Default relay configuration. Counts the pushes a device got more than once (what a user
/// sees twice), and what each event costs the relay while it waits on APNs: CPU (with X, CPU ns per event at
/// full speed from `throughput`, their ratio) and context switches. Then the same ratio for h2load against the
/// same mock: the floor of that ratio on this machine.
func slowAPNs() async throws {
    let count = option("events", 20_000)
    let answers = option("answers", 1500)
    let fullSpeed = Double(option("full-speed-ns", 0)) / 1000
    var options = RelaySandbox.Options()
    options.partitions = 16
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    say("== slow APNs: \(answers) answers/s, \(count) events in Kafka, default configuration")
    let events = makeEvents(count, payload: 300)
    try await sandbox.produceKept(events)
    sandbox.apns.faults.latency = FaultInjector.Latency(rtt: .milliseconds(5), answersPerSecond: answers)
    let reader = try OutputReader(sandbox: sandbox, logger: logger)
    var tally = ResultTally(resultsTopic: options.topics.results)
    // Cross-check of the /proc figure: the relay's whole life, exited threads and shutdown included, from
    // getrusage once it is reaped (no other child of this process ends while it runs).
    let reapedBefore = childrenContextSwitches()
    let relay = try RelayUnderTest(sandbox)
    // Sampled as the relay starts, right before it consumes the events waiting in Kafka, so the window is its
    // whole life like the CPU figure (see `ProcessProbe.contextSwitches` for threads that exit meanwhile).
    let switchesBefore = relay.probe.contextSwitches ?? .init(voluntary: 0, involuntary: 0)
    let started = ContinuousClock.now
    try await tally.collect(from: reader, expected: Set(events.map(\.key)), timeout: .seconds(600))
    let wall = ContinuousClock.now - started
    let cpu = relay.probe.cpuSeconds ?? 0
    let switches = (relay.probe.contextSwitches ?? switchesBefore) - switchesBefore
    relay.stop()
    let lifetime = childrenContextSwitches() - reapedBefore
    await reader.close()
    let duplicates = sandbox.apns.statistics.acceptedByDeviceToken.values.reduce(0) { $0 + max(0, $1 - 1) }
    // The same ratio for a C HTTP/2 client: h2load against the same mock, first at full speed, then answered at
    // `answers`/s as the relay was (a few answers per wake-up instead of hundreds): what the
    // machine charges per request for going slowly, whoever sends it.
    // As many requests in both runs, so that h2load's start (process, TLS handshakes) weighs the same on each.
    sandbox.apns.faults.latency = nil
    let h2Fast = try h2loadFloor(sandbox, requests: answers * 8, payload: 300, connections: 2, streams: 100)
    sandbox.apns.faults.latency = FaultInjector.Latency(rtt: .milliseconds(5), answersPerSecond: answers)
    let h2Slow = try h2loadFloor(sandbox, requests: answers * 8, payload: 300, connections: 2, streams: 100)
    await sandbox.stop()
    let notDelivered = count - (tally.outcomes["delivered"] ?? 0)
    let perEvent = cpu * 1e6 / Double(count)
    say("slow APNs: \(count) events in \(wall): outcomes \(tally.outcomes); \(duplicates) duplicate pushes; relay CPU \(f(perEvent)) µs/event")
    say("slow APNs: \(switches.voluntary) voluntary + \(switches.involuntary) involuntary context switches = \(switches.perEvent(count)) per event")
    say("slow APNs: whole life incl. shutdown and exited threads (getrusage): \(lifetime.voluntary) voluntary + \(lifetime.involuntary) involuntary")
    row("slow APNs (\(answers)/s, \(count) events): duplicate pushes / not delivered", "\(duplicates) / \(notDelivered)", floor: "0 / 0")
    row("slow APNs (\(answers)/s): relay CPU µs/event", f(perEvent), floor: fullSpeed > 0 ? "full speed \(f(fullSpeed)) µs/event" : "", ratio: fullSpeed > 0 ? f(perEvent / fullSpeed, 2) : "")
    row("slow APNs (\(answers)/s): context switches/event, voluntary / involuntary", switches.perEvent(count))
    say("slow APNs: h2load (2 connections x 100 streams) \(f(h2Slow.cpuPerRequestMicros, 2)) µs CPU per request at \(f(h2Slow.requestsPerSecond, 0)) req/s, \(f(h2Fast.cpuPerRequestMicros, 2)) at full speed (\(f(h2Fast.requestsPerSecond, 0)) req/s)")
    row("slow APNs (\(answers)/s), floor: h2load CPU µs/request", f(h2Slow.cpuPerRequestMicros, 1), floor: "full speed \(f(h2Fast.cpuPerRequestMicros, 1)) µs/request",
        ratio: f(h2Slow.cpuPerRequestMicros / h2Fast.cpuPerRequestMicros, 2))
}
