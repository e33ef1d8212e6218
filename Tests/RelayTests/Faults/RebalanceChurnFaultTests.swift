import Foundation
import RelaySandbox
import TestSupport
import ServiceSupport
import Testing
import APNsMock

extension FaultTests {
    /// Relay processes join and leave the consumer group every few seconds while events stream in: every
    /// join and every leave is a rebalance with revoked partitions drained and handed over. Both lanes are in
    /// use: a tenth of the events come through the urgent topic.
    @Test func rebalanceChurnLosesNothing() async throws {
        let seed = FaultSize.seed()
        print("fault rebalance-churn: seed \(seed) (replay with APNS_RELAY_FAULTS_SEED=\(seed))")
        var random = SeededGenerator(seed: seed)
        let steps = FaultSize.pick(reduced: 6, full: 24)
        let count = FaultSize.pick(reduced: 3000, full: 12000)
        // Members hear of a rebalance in their next heartbeat's answer; until then they keep finishing work
        // whose commits the mock coordinator refuses (see the bound below). librdkafka's 3 s default would let
        // a change redo up to 3 s of the group's work; 300 ms keeps it short. APNs answers in a fixed 100 ms.
        //
        // The input streams in small batches, 100 ms apart (all of it over the run's 16 s, as before: 3,000
        // bulk events in 160 batches of at most 19, their tenth as urgent ones in batches of at most 2), so
        // that what a change can redo follows from the feed: at most 21 events per 100 ms. What is waiting
        // when a change's span begins: one batch, plus what piles up while the group does not consume, from
        // the moment a member is revoked until its partitions are reassigned (each member hears within the
        // 300 ms notice, drains what it has in flight within the 200 ms in-flight span, and joins again in a
        // hand-off of 100 ms): 21 + 21 × 6 = 147. Between changes, 2 s or more apart, the group's capacity
        // (2,000 events/s per relay) empties such a pile-up about ten times faster than the feed refills it.
        // So a change redoes at most 147 + 21 × 8 (the 800 ms of its window and in-flight span) = 315 events,
        // whatever the size of the group — where the relays' capacity alone allowed 2,200 per member.
        // (The full form's 12,000 events in 520 batches make that 27 per 100 ms, 189 waiting, 405 per change.)
        let batches = (steps + 2) * 20
        let perBatch = (count + batches - 1) / batches + (count / 10 + batches - 1) / batches
        let bound = DuplicateBound(
            maxInFlight: 200, apnsLatency: .milliseconds(100), commitInterval: .milliseconds(200), rebalanceNotice: .milliseconds(300),
            feed: .init(events: perBatch, per: .milliseconds(100), backlog: perBatch * (1 + 6)))
        var options = RelaySandbox.Options()
        options.partitions = 8
        options.topics.urgent = [faultUrgentTopic]
        try await withSandbox(options, logger: logger) { sandbox in
            sandbox.apns.faults.latency = .init(rtt: bound.apnsLatency)
            var environment = sandbox.relayEnvironment(groupID: "churn-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS"] = String(bound.maxInFlight)
            environment["APNS_RELAY_KAFKA_AUTO_COMMIT_INTERVAL_MS"] = String(bound.commitInterval.milliseconds)
            environment["APNS_RELAY_APNS_POOL_ADAPTIVE_CONCURRENCY"] = "false"
            environment["APNS_RELAY_RELAY_DRAIN_TIMEOUT_MS"] = "5000"
            environment["APNS_RELAY_RELAY_REVOCATION_DRAIN_TIMEOUT_MS"] = "5000"
            environment["APNS_RELAY_LOG_LEVEL"] = "warning"
            environment["APNS_RELAY_KAFKA_CONSUMER_PROPERTIES"] = "heartbeat.interval.ms=\(bound.rebalanceNotice.milliseconds)"
            let events = faultEvents(0..<count, prefix: "r")
            let urgent = faultEvents(count..<count + count / 10, prefix: "u")
            let expected = Set((events + urgent).map(\.key))
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            var tally = ResultTally(resultsTopic: sandbox.options.topics.results)
            var relays = [try RelayProcess(environment: environment)]
            var joins = 1
            var leaves = 0
            // Members in the group at each change (every one of them is revoked and drains).
            var membersPerChange = [1]
            var badExits: [String] = []
            async let producing: Void = produceSpread(sandbox, events, batches: batches, spacing: bound.feed.per)
            async let producingUrgent: Void = produceSpread(sandbox, urgent, batches: batches, spacing: bound.feed.per, to: faultUrgentTopic)
            for _ in 0..<steps {
                // Membership changes this often; the point is to change it while the group is busy.
                try await Task.sleep(for: .milliseconds(Int.random(in: 2000...4000, using: &random)))
                let join = relays.count == 1 || (relays.count < 3 && Bool.random(using: &random))
                membersPerChange.append(relays.count)
                if join {
                    relays.append(try RelayProcess(environment: environment))
                    joins += 1
                } else {
                    let leaving = relays.remove(at: Int.random(in: 0..<relays.count, using: &random))
                    // A leave is a SIGTERM: drain, commit, leave the group.
                    let status = await leaving.terminate(timeout: .seconds(30))
                    if status != 0 { badExits.append("exit \(status.map(String.init) ?? "none (killed)"): \(leaving.log.suffix(1500))") }
                    leaves += 1
                }
            }
            try await producing
            try await producingUrgent
            try await tally.collect(from: reader, expected: expected, timeout: .seconds(240))
            for relay in relays {
                let status = await relay.terminate(timeout: .seconds(30))
                if status != 0 { badExits.append("exit \(status.map(String.init) ?? "none (killed)"): \(relay.log.suffix(1500))") }
            }
            // Every relay has stopped: the results read to their end, so a duplicate written late counts too.
            tally.add(try await reader.readToEnd(of: sandbox.options.topics.results, timeout: .seconds(60)))
            await reader.close()
            #expect(badExits.isEmpty, "every leaving relay exits 0 after SIGTERM: \(badExits)")
            print("fault rebalance-churn: \(joins) joins, \(leaves) leaves")
            // Per join or leave, every member is revoked and redoes its share (DuplicateBound): librdkafka's mock
            // coordinator refuses OffsetCommit with REBALANCE_IN_PROGRESS while the group is joining (a real
            // broker accepts commits of the current generation then), so the commits from the joiner's
            // JoinGroup until each member hears of it, a heartbeat later, fail and the next owner redoes that work.
            print("fault rebalance-churn: duplicate bound \(bound), members per change \(membersPerChange)")
            finishFaultRun(
                "rebalance-churn", tally: tally, expected: expected, faults: joins - 1 + leaves,
                duplicateBound: bound.changes(membersPerChange: membersPerChange)
            )
        }
    }
}
