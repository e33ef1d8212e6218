import Foundation
import Kafka
import RelaySandbox
import ServiceSupport

/// `exactly-once [--events N] [--partitions P] [--pairs K] [--rate R] [--seconds S] [--interval MS]`: what
/// `kafka.exactlyOnce` costs (#36), on librdkafka's mock broker (which runs the transactional produce, offsets and commit path;
/// it does not store the offsets, which this does not need). Paired runs in turn, off then on, each in a
/// sandbox of its own, so that the machine's drift falls on both alike:
/// 1. a backlog of N events: relay CPU per event and events/s, until a `read_committed` reader has every result;
/// 2. events produced at R/s for S seconds: produce → visible latency for a `read_committed` reader (the
///    relay and the reader with fetch.wait.max.ms=10, see `paced`), against the transaction interval.
func exactlyOnceCost() async throws {
    let count = option("events", 100_000)
    let partitions = option("partitions", 32)
    let pairs = option("pairs", 2)
    let rate = option("rate", 1000)
    let seconds = option("seconds", 10)
    let interval = option("interval", 100)  // kafka.transactionIntervalMs (its default: 100)
    say("== exactly-once, kafka.transactionIntervalMs \(interval): \(pairs) pairs (off, on) of \(count) events over \(partitions) partitions; then \(rate) events/s for \(seconds) s, off and on")
    func settings(_ on: Bool) -> [String: String] {
        on ? ["APNS_RELAY_KAFKA_EXACTLY_ONCE": "true", "APNS_RELAY_KAFKA_TRANSACTIONAL_ID": "bench-\(UUID().uuidString.prefix(8))",
              "APNS_RELAY_KAFKA_TRANSACTION_INTERVAL_MS": "\(interval)"] : [:]
    }

    var cpu: [Bool: [Double]] = [false: [], true: []]
    var rates: [Bool: [Double]] = [false: [], true: []]
    for pair in 1...pairs {
        for on in [false, true] {
            var options = RelaySandbox.Options()
            options.partitions = partitions
            let sandbox = try await RelaySandbox(options: options, logger: logger)
            try await sandbox.produceKept(makeEvents(count, payload: 300))
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            var tally = ResultTally(resultsTopic: options.topics.results)
            let started = ContinuousClock.now
            let relay = try RelayUnderTest(sandbox, extra: settings(on))
            try await tally.collect(from: reader, untilResults: count, timeout: .seconds(900))
            let elapsed = ContinuousClock.now - started
            let seconds = elapsed.seconds
            let perEvent = (relay.probe.cpuSeconds ?? 0) * 1e6 / Double(count)
            relay.stop()
            await reader.close()
            await sandbox.stop()
            if tally.distinctKeys < count { throw BenchmarkError("exactly-once \(on ? "on" : "off"): only \(tally.distinctKeys) of \(count) events have a result") }
            cpu[on]!.append(perEvent)
            rates[on]!.append(Double(count) / seconds)
            say("exactly-once \(on ? "on " : "off") pair \(pair): \(f(perEvent, 1)) µs CPU/event, \(f(Double(count) / seconds, 0)) events/s to read_committed, \(tally.duplicates) duplicates")
        }
    }
    let ratios = zip(cpu[true]!, cpu[false]!).map { $0 / $1 }.sorted()
    let median = ratios.count % 2 == 1 ? ratios[ratios.count / 2] : (ratios[ratios.count / 2 - 1] + ratios[ratios.count / 2]) / 2
    func mean(_ values: [Double]) -> Double { values.reduce(0, +) / Double(values.count) }
    row("exactly-once on (interval \(interval) ms): relay CPU µs/event (\(count / 1000)k events, target ≤ 1.15× off)", f(mean(cpu[true]!), 1),
        floor: "off \(f(mean(cpu[false]!), 1))", ratio: f(median, 2))
    row("exactly-once on (interval \(interval) ms): events/s to a read_committed reader", f(mean(rates[true]!), 0),
        floor: "off \(f(mean(rates[false]!), 0))", ratio: f(mean(rates[true]!) / mean(rates[false]!), 2))

    var p99: [Bool: Int64] = [:]
    for on in [false, true] {
        var options = RelaySandbox.Options()
        options.partitions = partitions
        let sandbox = try await RelaySandbox(options: options, logger: logger)
        let reader = try OutputReader(sandbox: sandbox, logger: logger, fetchWait: .milliseconds(10))
        var extra = settings(on)
        extra["APNS_RELAY_KAFKA_CONSUMER_PROPERTIES"] = "fetch.wait.max.ms=10"
        let relay = try RelayUnderTest(sandbox, extra: extra)
        // Warm-up, through the paced producer itself (its first record waits for its connection and metadata):
        // the relay joins its group and opens its connections on a first event.
        let production = try PacedProduction(sandbox)
        try await production.warmUp()
        _ = try await reader.results(count: 1, timeout: .seconds(60))
        let results = options.topics.results
        // Each result's key is its event's: the time it was handed to the producer, and the time the reader got it.
        try production.start(rate: rate, seconds: seconds)
        var visible: [String: ContinuousClock.Instant] = [:]
        var consumed = 0
        _ = try await reader.collect(timeout: .seconds(Int64(seconds) + 120)) { records in
            let now = ContinuousClock.now
            while consumed < records.count {
                let record = records[consumed]
                if record.topic == results, let key = record.key.map({ String(decoding: $0, as: UTF8.self) }), key.hasPrefix("p"), visible[key] == nil {
                    visible[key] = now
                }
                consumed += 1
            }
            return visible.count >= rate * seconds
        }
        let sent = try await production.times()
        relay.stop()
        await reader.close()
        await sandbox.stop()
        let latencies = sent.compactMap { key, at in visible[key].map { ($0 - at).milliseconds } }.sorted()
        p99[on] = percentile(latencies, 0.99)
        say("exactly-once \(on ? "on " : "off") paced \(rate)/s: produce → visible to read_committed p50 \(percentile(latencies, 0.5)) ms p99 \(percentile(latencies, 0.99)) ms max \(latencies.last ?? 0) ms (\(latencies.count) of \(sent.count))")
    }
    row("exactly-once on (interval \(interval) ms), \(rate)/s: produce → read_committed p99 ms (target ≤ interval + 50)", "\(p99[true]!)",
        floor: "off \(p99[false]!)", ratio: f(Double(p99[true]!) / Double(max(1, p99[false]!)), 2))
}

/// Events produced at a rate on a thread of its own (the reader's loop runs meanwhile on the benchmark's task),
/// with the time each (by key) was handed to the producer.
private final class PacedProduction: Sendable {
    private let done = Latch<Result<[String: ContinuousClock.Instant], KafkaError>>()
    private let producer: KafkaProducer
    private let topic: String

    init(_ sandbox: RelaySandbox) throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: [sandbox.bootstrapServers])
        configuration.clientID = "bench-paced-producer"
        configuration.linger = .zero
        producer = try KafkaProducer(configuration: configuration, logger: logger)
        try producer.start()
        topic = sandbox.options.inputTopic
    }

    /// One event ("warm-up"), once delivered: later records do not wait for a connection.
    func warmUp() async throws {
        let delivered = Latch<Result<Void, KafkaError>>()
        let value = SampleEvents.event(id: "warm-up", deviceToken: SampleEvents.token(0), payload: SampleEvents.payload(bytes: 300))
        try producer.produce(topic: topic, key: Array("warm-up".utf8), value: value) { report in
            delivered.set(report.map { _ in () })
        }
        guard let result = await delivered.wait(timeout: .seconds(30)) else { throw BenchmarkError("the paced producer's first record was not delivered within 30 s") }
        try result.get()
    }

    /// Starts producing `rate` events a second (keys p0, p1, …) for `seconds`.
    func start(rate: Int, seconds: Int) throws {
        let (producer, topic, done) = (self.producer, self.topic, self.done)
        try DedicatedThread.start(name: "bench-paced") {
            let body = SampleEvents.payload(bytes: 300)
            let start = ContinuousClock.now
            var times: [String: ContinuousClock.Instant] = [:]
            for tick in 0..<(seconds * 100) {
                while times.count < rate * (tick + 1) / 100 {
                    let key = "p\(times.count)"
                    times[key] = .now
                    do {
                        try producer.produce(topic: topic, key: Array(key.utf8), value: SampleEvents.event(id: key, deviceToken: SampleEvents.token(times.count), payload: body)) { _ in }
                    } catch {
                        done.set(.failure(error as? KafkaError ?? KafkaError(code: .closed, message: "\(error)")))
                        return
                    }
                }
                let wait = start + .milliseconds(10 * (tick + 1)) - .now
                if wait > .zero { usleep(UInt32(wait.nanoseconds / 1000)) }  // the pacing
            }
            done.set(.success(times))
        }
    }

    /// Waits for the last event to be handed over, then closes the producer.
    func times() async throws -> [String: ContinuousClock.Instant] {
        let result = await done.wait()!
        try await producer.close(timeout: .seconds(10))
        return try result.get()
    }
}
