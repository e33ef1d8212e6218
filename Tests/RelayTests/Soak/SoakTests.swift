import APNsCore
import APNsMock
import Foundation
import Logging
import RelayApp
import RelaySandbox
import ServiceSupport
import Synchronization
import TestSupport
import Testing

/// A day in production, compressed (`make soak`; the short form in `make test`): the built relay between
/// librdkafka's mock cluster (three brokers) and the mock APNs (which enforces Apple's token rules: no token
/// change on a connection within 20 minutes, none older than an hour), a paced production-like stream
/// (`SoakTraffic`), and a fault schedule through the run (`SoakPlan`). A leak watch samples the relay every
/// period (`LeakWatch`); the end checks that nothing was lost, duplicates stay within the fault suite's bound,
/// APNs refused no provider token, every fault showed its effect, threads and descriptors came back and the
/// results caught up after every fault (p99 is reported, not judged), and memory is flat in the second half. It writes a table and a picture (`SoakReport`, Tests/soak/plot.py)
/// into `APNS_RELAY_SOAK_OUTPUT` (`make soak`: bench-results/soak), else .build/soak.
@Suite(.serialized, .timeLimit(.minutes(600)))
struct SoakTests {
    let logger = {
        var logger = Logger(label: "soak")
        logger.logLevel = .critical
        return logger
    }()

    /// Memory growth allowed in the second half, in MiB per hour of the soak's 100 events/s (360,000 events):
    /// the heap 2 MiB (6 bytes an event: a leak of any object per event, 16 bytes at least, is over it), the
    /// resident size 8 MiB (the allocator's arenas and librdkafka's buffers settle slowly).
    static let heapSlopeBound = 2.0
    static let rssSlopeBound = 8.0
    /// A run under half an hour (the short form's second half is 75 s, 7,500 events) has a slope that is mostly
    /// the noise of what is in flight: its growth (medians of the last and the first quarter) is checked instead. 1 MiB is 140 bytes
    /// an event: a leak of one small object per event shows; RelayMemoryTests bounds it closer at full speed.
    static let shortHeapGrowthBound = 1.0
    static let shortRSSGrowthBound = 4.0

    @Test func aDayInProductionCompressed() async throws {
        let plan = SoakPlan.current
        print(plan)
        var options = RelaySandbox.Options()
        options.brokers = 3
        options.partitions = 6
        options.topics.urgent = [faultUrgentTopic]
        try await withSandbox(options, logger: logger) { sandbox in
            let apns = sandbox.apns
            let baseLatency = FaultInjector.Latency(rtt: plan.apnsRoundTrip)
            apns.faults.latency = baseLatency
            let channels = try await DemoChannels.create(try await sandbox.relayConfiguration(), environment: .development, logger: logger)
            let traffic = SoakTraffic(channels: channels, nowSeconds: Int64(Date().timeIntervalSince1970))
            traffic.arm(apns)
            let group = "soak-\(UUID().uuidString.prefix(8))"
            func environment(adminPort: Int) -> [String: String] {
                var environment = sandbox.relayEnvironment(groupID: group)
                for (key, value) in plan.relaySettings(adminPort: adminPort) {
                    environment["APNS_RELAY_" + RelayAppConfiguration.environmentName(forKey: key)] = value
                }
                return environment
            }

            let produced = Counter()
            let results = SoakResults(resultsTopic: sandbox.options.topics.results)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let reading = Task { await results.read(from: reader) }

            /// Starts a relay and waits for its admin port: a relay that refuses its configuration ends the soak
            /// at once, with its log, not after an hour of empty samples.
            func startRelay(adminPort: Int) async throws -> RelayProcess {
                let relay = try RelayProcess(environment: environment(adminPort: adminPort))
                do {
                    try await eventually("the relay answers on its admin port", within: .seconds(60), every: .milliseconds(200)) {
                        try await http("http://127.0.0.1:\(adminPort)/metrics").status == 200
                    }
                } catch {
                    throw TestFailure("\(error); its log: \(relay.log.suffix(2000))")
                }
                return relay
            }
            var port = try freeLocalPort()
            var relay = try await startRelay(adminPort: port)
            var logs: [(String, RelayProcess)] = [("relay-1", relay)]
            let target = Mutex((pid: relay.process.processIdentifier, adminPort: port))
            let start = ContinuousClock.now
            let kafkaPorts = Set(sandbox.bootstrapServers.split(separator: ",").compactMap { $0.split(separator: ":").last.flatMap { Int($0) } })
            let watch = LeakWatch(
                target: { target.withLock { $0 } }, counts: { (produced.value, results.count) },
                apnsPorts: [sandbox.apnsPort, sandbox.managementPort], kafkaPorts: kafkaPorts, start: start, every: plan.sampleEvery)
            let watching = Task { await watch.run() }

            let bulk = try EventStream(sandbox: sandbox, logger: logger)
            let urgent = try EventStream(sandbox: sandbox, topic: faultUrgentTopic, logger: logger)
            async let bulkSent = bulk.run(batch: plan.rate / 10, interval: .milliseconds(100)) { n in
                produced.add(1)
                return traffic.bulk(n)
            }
            async let urgentSent = urgent.run(batch: 1, interval: .milliseconds(500)) { n in
                produced.add(1)
                return traffic.urgent(n)
            }

            var records: [SoakReport.FaultRecord] = []
            var second: (relay: RelayProcess, adminPort: Int)?
            let brokers: [Int32] = [1, 2, 3]
            let allPartitions = options.partitions * sandbox.options.topics.inputs.count
            /// The relay's `apns_relay_assigned_partitions`, from its admin port.
            func assignedPartitions(adminPort: Int) async -> Double? {
                (try? await http("http://127.0.0.1:\(adminPort)/metrics")).flatMap { metric($0.body, "apns_relay_assigned_partitions") }
            }
            /// Waits for `condition`, the visible effect of a fault; its description, or nil if it did not show.
            func seen(_ what: String, within timeout: Duration = .seconds(60), _ condition: () async throws -> Bool) async -> String? {
                do {
                    try await eventually(what, within: timeout, every: .milliseconds(200), condition)
                    return what
                } catch {
                    return nil
                }
            }
            for step in plan.schedule {
                // The schedule's own clock: faults come at set times, whatever the relay is doing.
                try await Task.sleep(until: start + step.at)
                let began = (ContinuousClock.now - start).seconds
                let faultStart = ContinuousClock.now
                let before = apns.statistics
                // What shows the fault happened, seen from outside the test's own command; nil if it did not show.
                let effect: String?
                switch step.fault {
                case .relayKilled:
                    let killed = relay
                    killed.kill()
                    port = try freeLocalPort()
                    relay = try await startRelay(adminPort: port)
                    logs.append(("relay-\(logs.count + 1)", relay))
                    target.withLock { $0 = (relay.process.processIdentifier, port) }
                    let (old, new) = (killed.process.processIdentifier, relay.process.processIdentifier)
                    effect = !killed.process.isRunning && killed.process.terminationReason == .uncaughtSignal && old != new
                        ? "pid \(old) ended by signal \(killed.process.terminationStatus), pid \(new) answers on its admin port" : nil
                case .kafkaUnreachable:
                    for broker in brokers { try sandbox.cluster.setBrokerDown(broker) }
                    let adminPort = port
                    effect = await seen("/readyz refused while every broker is down") {
                        (try? await http("http://127.0.0.1:\(adminPort)/readyz"))?.status == 503
                    }
                    try await Task.sleep(until: faultStart + step.length)  // the fault's length
                    for broker in brokers { try sandbox.cluster.setBrokerUp(broker) }
                case .brokerDown:
                    // No outside view of one broker's absence beyond the cluster taking the command (the relay
                    // stays ready with two of three); recovery and the duplicate bound judge what it did.
                    try sandbox.cluster.setBrokerDown(2)
                    try await Task.sleep(for: step.length)  // the fault's length
                    try sandbox.cluster.setBrokerUp(2)
                    effect = "broker 2 down and up (taken by the mock cluster)"
                case .leaderMove:
                    for topic in sandbox.options.topics.inputs + sandbox.options.topics.outputs {
                        for partition in 0..<Int32(options.partitions) {
                            try sandbox.cluster.setPartitionLeader(topic: topic, partition: partition, brokerID: (partition + 1) % 3 + 1)
                        }
                    }
                    effect = "leaders moved (taken by the mock cluster)"
                case .relayJoins:
                    let joiningPort = try freeLocalPort()
                    let joining = try await startRelay(adminPort: joiningPort)
                    logs.append(("second-relay", joining))
                    second = (joining, joiningPort)
                    effect = await seen("the second relay was assigned partitions") { (await assignedPartitions(adminPort: joiningPort) ?? 0) > 0 }
                case .relayLeaves:
                    let status = await second?.relay.terminate(timeout: .seconds(60))
                    #expect(status == 0, "the second relay left with status \(String(describing: status))")
                    second = nil
                    let remainingPort = port
                    if status == 0 {
                        effect = await seen("the remaining relay holds all \(allPartitions) partitions again") {
                            await assignedPartitions(adminPort: remainingPort) == Double(allPartitions)
                        }
                    } else {
                        effect = nil
                    }
                case .apnsGoAway:
                    apns.faults.goAwayAfterStreams = 300
                    await apns.goAway()
                    try await Task.sleep(for: step.length)  // the fault's length
                    apns.faults.goAwayAfterStreams = nil
                    let sent = apns.statistics.goAwaysSent - before.goAwaysSent
                    effect = sent > 0 ? "\(sent) GOAWAYs sent" : nil
                case .apnsStorm:
                    for reason in [APNsReason.tooManyRequests, .internalServerError, .serviceUnavailable] { apns.faults.setFailureRate(0.15, for: reason) }
                    try await Task.sleep(for: step.length)  // the fault's length
                    for reason in [APNsReason.tooManyRequests, .internalServerError, .serviceUnavailable] { apns.faults.setFailureRate(0, for: reason) }
                    let after = apns.statistics
                    let answered = [APNsReason.tooManyRequests, .internalServerError, .serviceUnavailable].map { after.count($0) - before.count($0) }
                    effect = answered.allSatisfy { $0 > 0 } ? "429, 500, 503 answered \(answered) times" : nil
                case .connectionResets:
                    await apns.closeAllConnections()
                    apns.faults.dropConnectionOnNext(10)
                    try await Task.sleep(for: step.length / 2)  // half the fault's length
                    await apns.closeAllConnections()
                    try await Task.sleep(for: step.length / 2)  // the rest of it
                    let dropped = apns.statistics.droppedConnections - before.droppedConnections
                    effect = dropped > 0 ? "\(dropped) connections dropped" : nil
                case .slowAnswers:
                    apns.faults.latency = FaultInjector.Latency(rtt: .seconds(1), jitter: .milliseconds(200))
                    try await Task.sleep(for: step.length)  // the fault's length
                    apns.faults.latency = baseLatency
                    // Every answer of the window was held a second or so: the requests that came in it.
                    let slowed = apns.statistics.requests - before.requests
                    effect = slowed > 0 ? "\(slowed) requests answered after 1 s or so" : nil
                }
                records.append(SoakReport.FaultRecord(fault: step.fault, start: began, end: (ContinuousClock.now - start).seconds, effect: effect))
            }
            // The quiet end of the run, where memory must be flat.
            try await Task.sleep(until: start + plan.duration)
            bulk.stop()
            urgent.stop()
            let sent = (bulk: try await bulkSent, urgent: try await urgentSent)
            await bulk.close()
            await urgent.close()
            let expected = (0..<sent.bulk).map { "s\($0)" } + (0..<sent.urgent).map { "u\($0)" }
            try? await eventually("a result for each of the \(expected.count) events", within: .seconds(180), every: .milliseconds(500)) {
                results.missing(expected).isEmpty
            }
            watching.cancel()
            let samples = await watching.value
            results.stop()
            await reading.value
            await reader.close()
            let status = await relay.terminate(timeout: .seconds(60))
            #expect(status == 0, "the relay stopped with status \(String(describing: status))")

            // What the mock saw of provider tokens.
            let statistics = apns.statistics
            let tooManyUpdates = statistics.count(.tooManyProviderTokenUpdates)
            let expired = statistics.count(.expiredProviderToken)
            let tokens = apns.providerTokensIssuedAt
            let tally = results.tally
            let lost = tally.missing(expected)
            let duplicateBound = plan.duplicateBound
            let report = SoakReport(plan: plan, samples: samples, faults: records)

            // The summary: the table and every invariant with its figure.
            let outcomes = tally.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            func f(_ value: Double?, _ format: String = "%.2f") -> String { value.map { String(format: format, $0) } ?? "–" }
            func i(_ value: Int?) -> String { value.map(String.init) ?? "–" }
            let last = samples.last { $0.threads != nil }
            let baseline = report.baseline
            let memory = plan.measuresSlope
                ? "RSS \(f(report.rssSlope)) MiB/h (bound \(Self.rssSlopeBound)), heap in use \(f(report.heapSlope)) MiB/h (bound \(Self.heapSlopeBound)); growth RSS \(f(report.rssGrowth)) MiB, heap \(f(report.heapGrowth)) MiB"
                : "growth RSS \(f(report.rssGrowth)) MiB (bound \(Self.shortRSSGrowthBound)), heap in use \(f(report.heapGrowth)) MiB (bound \(Self.shortHeapGrowthBound)); slopes RSS \(f(report.rssSlope)) MiB/h, heap \(f(report.heapSlope)) MiB/h"
            let summary = """
                \(plan)

                events \(expected.count) (bulk \(sent.bulk), urgent \(sent.urgent)); results \(tally.results); lost \(lost.count); duplicates \(tally.duplicates) (bound \(duplicateBound.total): \(duplicateBound.bound))
                outcomes: \(outcomes)
                provider tokens: \(tokens.count) verified by APNs (iat \(tokens.map(String.init).joined(separator: ", "))), \(apns.acceptedConnectionTokenUpdates) token changes on a connection accepted; refused: TooManyProviderTokenUpdates \(tooManyUpdates), ExpiredProviderToken \(expired)
                baseline (the warm-up's second half): threads other than libdispatch's \(i(baseline?.ownThreads)), descriptors other than connections \(i(baseline?.otherFds)), RSS \(f(baseline?.rssMiB, "%.1f")) MiB, heap in use \(f(baseline?.heapMiB, "%.1f")) MiB, p99 \(f(baseline?.p99, "%.0f")) ms
                end: threads other than libdispatch's \(i(last?.ownThreads)), libdispatch's \(i(last?.dispatchThreads)) (at most \(plan.dispatchThreadBound)), descriptors other than connections \(i(last?.otherFds)), Kafka connections \(i(last?.kafkaSockets)) (at most \(plan.kafkaSocketBound)), APNs sockets \(i(last?.apnsSockets)) for \(f(last?.connections, "%.0f")) pool connections, RSS \(f(last?.rssMiB, "%.1f")) MiB, heap in use \(f(last?.heapMiB, "%.1f")) MiB
                second half: \(memory)

                \(report.faultTable)

                """
            print(summary)
            let output = ProcessInfo.processInfo.environment["APNS_RELAY_SOAK_OUTPUT"].map { URL(fileURLWithPath: $0) }
                ?? Checkout.root.appendingPathComponent(".build/soak")
            try report.write(to: output, summary: summary)
            for (name, process) in logs { try? process.log.write(to: output.appendingPathComponent("\(name).log"), atomically: true, encoding: .utf8) }
            let python = Checkout.root.appendingPathComponent(".venv/bin/python").path
            let plotted = try await runProcess(python, [Checkout.root.appendingPathComponent("Tests/soak/plot.py").path, output.path])
            #expect(plotted.status == 0, "plot.py: \(plotted.stderr)")
            let picture = (try? FileManager.default.attributesOfItem(atPath: output.appendingPathComponent("soak.png").path)[.size] as? Int) ?? 0
            #expect(picture > 10_000, "soak.png: \(picture) bytes")
            print("soak: the table, the samples and the picture are in \(output.path)")

            #expect(lost.isEmpty, "\(lost.count) events without a result, e.g. \(lost.prefix(5))")
            #expect(tally.duplicates <= duplicateBound.total, "\(tally.duplicates) duplicates > bound \(duplicateBound.total)")
            #expect(tooManyUpdates == 0 && expired == 0, "APNs refused provider tokens: TooManyProviderTokenUpdates \(tooManyUpdates), ExpiredProviderToken \(expired)")
            if plan.duration >= .seconds(61 * 60) {
                #expect(tokens.count >= 3, "two token rotations need three tokens in a run over an hour: \(tokens)")
            }
            #expect(records.map(\.fault) == plan.schedule.map(\.fault), "the schedule ran to its end")
            for record in records {
                #expect(record.effect != nil, "\(record.fault.rawValue) at \(Int(record.start)) s: its effect did not show")
            }
            let settled = try #require(baseline, "no baseline: the warm-up's samples lack a value")
            // Recovery is progress, which no machine's speed decides: after each fault the results reach what
            // was produced by its end. p99 is reported in the table, not judged: it measures the machine too.
            for recovery in report.recoveries {
                let name = recovery.record.fault.rawValue
                #expect(recovery.resourcesBackAfter != nil, "\(name): threads and descriptors not back at the baseline within \(plan.recoveryAllowance)")
                #expect(recovery.caughtUpAfter != nil, "\(name): the results did not reach the \(i(recovery.producedByEnd)) events produced by the fault's end within \(plan.recoveryAllowance)")
            }
            let end = try #require(last)
            #expect(SoakReport.isBack(end, baseline: settled, plan: plan), "at the end: threads other than libdispatch's \(i(end.ownThreads)), libdispatch's \(i(end.dispatchThreads)) (at most \(plan.dispatchThreadBound)), descriptors \(i(end.otherFds)), Kafka connections \(i(end.kafkaSockets)), APNs sockets \(i(end.apnsSockets)) for \(f(end.connections)) connections; baseline threads \(settled.ownThreads), descriptors \(settled.otherFds)")
            if plan.measuresSlope {
                let heapSlope = try #require(report.heapSlope), rssSlope = try #require(report.rssSlope)
                #expect(heapSlope <= Self.heapSlopeBound, "heap in use grew \(heapSlope) MiB/h in the second half")
                #expect(rssSlope <= Self.rssSlopeBound, "RSS grew \(rssSlope) MiB/h in the second half")
            } else {
                let heapGrowth = try #require(report.heapGrowth), rssGrowth = try #require(report.rssGrowth)
                #expect(heapGrowth <= Self.shortHeapGrowthBound, "heap in use grew \(heapGrowth) MiB in the second half")
                #expect(rssGrowth <= Self.shortRSSGrowthBound, "RSS grew \(rssGrowth) MiB in the second half")
            }
        }
    }
}

/// The results read so far, by the reading task, for the watch and the end.
private final class SoakResults: Sendable {
    private let state: Mutex<ResultTally>
    private let stopped = Atomic<Bool>(false)

    init(resultsTopic: String) { state = Mutex(ResultTally(resultsTopic: resultsTopic)) }

    /// Reads output in half-second slices until `stop()`.
    func read(from reader: OutputReader) async {
        while !stopped.load(ordering: .relaxed) {
            guard let records = try? await reader.read(for: .milliseconds(500)) else { continue }
            state.withLock { $0.add(records) }
        }
    }

    func stop() { stopped.store(true, ordering: .relaxed) }
    var count: Int { state.withLock { $0.results } }
    var tally: ResultTally { state.withLock { $0 } }
    func missing(_ keys: [String]) -> [String] { state.withLock { $0.missing(keys) } }
}

/// A count shared by the streams' event closures and the watch.
private final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add(_ n: Int) { count.add(n, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
