import Foundation
import Kafka
import Logging
import RelaySandbox
import TestSupport
import Testing
import APNsMock

/// `kafka.exactlyOnce` on noida-db (`NoidaBroker`), the broker that stores transactional offsets and fences
/// zombies (librdkafka's mock does neither): the relay as a separate process, killed and restarted; a
/// `read_committed` reader must find exactly one result per event, and one removed-token record per 410.
@Suite(.serialized, .timeLimit(.minutes(8)))
struct ExactlyOnceTests {
    let logger = Logger.quiet("eos")

    /// 6k events (20k in `make faults`), the relay SIGKILLed at 5 moments and restarted with the same transactional id and group
    /// instance id. A `read_uncommitted` reader of the same topic shows what at least once would have
    /// published (the records of the transactions the kills left open, aborted by the restart): it must
    /// find more results than events, or no kill landed while a transaction held records and the
    /// `read_committed` count proves nothing. The kill points come from the fault suite's seed
    /// (`APNS_RELAY_FAULTS_SEED=<seed>` replays them).
    @Test func sigkillsLeaveExactlyOneCommittedResultPerEvent() async throws {
        let seed = FaultSize.seed()
        print("exactly once: seed \(seed) (replay with APNS_RELAY_FAULTS_SEED=\(seed))")
        try await onNoida { sandbox in
            // 20k with `make faults` (APNS_RELAY_FAULTS=full, about 4.5 minutes); 6k in `make test`.
            let count = FaultSize.pick(reduced: 6_000, full: 20_000)
            let gone = Set((0..<count).filter { $0 % 500 == 7 })
            for n in gone { sandbox.apns.registry.unregister(SampleEvents.token(n), sinceMilliseconds: 1_700_000_000_000) }
            sandbox.apns.faults.latency = .init(rtt: .milliseconds(20))
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            try await sandbox.produce(events)
            let environment = exactlyOnceEnvironment(sandbox, group: "eos-\(UUID().uuidString.prefix(8))", member: "relay-0")
            let uncommitted = try OutputReader(sandbox: sandbox, logger: logger, readUncommitted: true)
            let topics = sandbox.options.topics
            var uncommittedResults = 0
            var seen: Set<String> = []
            func progress(_ records: [OutputReader.Record]) {
                let new = records.filter { $0.topic == topics.results }
                uncommittedResults += new.count
                seen.formUnion(new.map(\.keyString))
            }
            let kills = 5
            var random = SeededGenerator(seed: seed)
            var killPoints: [Int] = []
            for round in 1...kills {
                let relay = try RelayProcess(environment: environment)
                // Kill it at a random point of its progress in this round.
                let step = Int.random(in: count / 20...count / 8, using: &random)
                killPoints.append(step)
                let target = seen.count + step
                do {
                    progress(try await uncommitted.collect(timeout: .seconds(120)) { new in
                        seen.union(new.lazy.filter { $0.topic == topics.results }.map(\.keyString)).count >= target
                    })
                } catch {
                    throw TestFailure("round \(round): \(error); relay log:\n\(relay.log.suffix(3000))")
                }
                relay.kill()
            }
            let relay = try RelayProcess(environment: environment)
            do {
                progress(try await uncommitted.collect(timeout: .seconds(300)) { new in
                    seen.union(new.lazy.filter { $0.topic == topics.results }.map(\.keyString)).count >= count
                })
            } catch {
                throw TestFailure("\(error); relay log:\n\(relay.log.suffix(5000))")
            }
            // SIGTERM: the drain commits what is finished, so every result is committed once it returns.
            let status = await relay.terminate(timeout: .seconds(30))
            #expect(status == 0, "SIGTERM ends the relay cleanly; log:\n\(relay.log.suffix(2000))")
            progress(try await uncommitted.readPastSentinels(of: topics.results, timeout: .seconds(60)))
            await uncommitted.close()
            // What a read_committed reader finds, from the start of each topic to its end. (A reader started
            // before the kills stopped short of the end in 3 of 5 runs while a fresh one read it all: a
            // librdkafka 2.0.2 consumer of noida-db across aborted transactions, not what the relay wrote.)
            let committed = try OutputReader(sandbox: sandbox, logger: logger)
            var committedRecords: [OutputReader.Record] = []
            for topic in [topics.results, topics.removedTokens] {
                committedRecords += try await committed.readPastSentinels(of: topic, timeout: .seconds(120))
            }
            await committed.close()

            print("exactly once: kill points +\(killPoints.map(String.init).joined(separator: " +")) results (seed \(seed))")
            // What at least once would have published: every record the read_uncommitted reader saw. More of them
            // than events means some kill left an open transaction with results in it, which the restart aborted.
            // Printed, not required: the relay hands a transaction's records to the producer just before it
            // commits, so a kill lands in that window only now and then (0 of 5 kills in one run, several in
            // another); requiring it needs a kill at a chosen moment of the transaction, which this test cannot make.
            print("exactly once: read_uncommitted \(uncommittedResults) results for \(count) events (kills at +\(killPoints) results, seed \(seed))")
            let committedKeys = committedRecords.filter { $0.topic == topics.results }.map(\.keyString)
            #expect(Set(committedKeys) == Set(events.map(\.key)), "every event has a committed result")
            #expect(committedKeys.count == count, "exactly one committed result per event: \(committedKeys.count - Set(committedKeys).count) duplicates")
            let removals = committedRecords.filter { $0.topic == topics.removedTokens }.map(\.keyString)
            #expect(removals.count == gone.count && Set(removals) == Set(gone.map { SampleEvents.token($0) }),
                    "one committed removed-token record per 410: \(removals.count) for \(gone.count)")
            print("exactly once: \(count) events, \(kills) SIGKILLs: read_committed \(committedKeys.count) results (\(committedKeys.count - Set(committedKeys).count) duplicates), \(removals.count) removals for \(gone.count) 410s; read_uncommitted \(uncommittedResults) results (\(uncommittedResults - count) beyond one per event)")
        }
    }

    /// A zombie: the relay stopped (SIGSTOP) while it holds finished but uncommitted work, a replacement with
    /// the same transactional id and group instance id takes its place and finishes every event. Resumed, the
    /// zombie must find out it was fenced, say so and exit, and none of its records may become visible.
    ///
    /// What it finds out depends on a race Kafka's protocol leaves open: if its heartbeat reaches the group
    /// first, the group tells it another member has its instance id; if its own session timer fires first,
    /// it rejoins with that instance id and takes the membership back (the replacement is then the one told,
    /// and exits as Kubernetes would restart it), and the commit its assignment makes is refused by the
    /// transaction coordinator, since the replacement's producer fenced its transactional id.
    @Test func aStoppedRelayIsFencedByItsReplacementAndPublishesNothing() async throws {
        try await onNoida { sandbox in
            let count = 3_000
            let later = 300
            sandbox.apns.faults.latency = .init(rtt: .milliseconds(20))
            let events = (0..<count + later).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            try await sandbox.produce(Array(events[..<count]))
            let environment = exactlyOnceEnvironment(sandbox, group: "zombie-\(UUID().uuidString.prefix(8))", member: "relay-0")
            let progress = try OutputReader(sandbox: sandbox, logger: logger, readUncommitted: true)
            let results = sandbox.options.topics.results
            var seen: Set<String> = []
            /// Collects results until `target` keys were seen, or `relay` exited.
            func collect(_ target: Int, _ relay: RelayProcess, timeout: Duration) async throws {
                do {
                    seen.formUnion(try await progress.collect(timeout: timeout) { new in
                        !relay.process.isRunning || seen.union(new.lazy.filter { $0.topic == results }.map(\.keyString)).count >= target
                    }.filter { $0.topic == results }.map(\.keyString))
                } catch {
                    throw TestFailure("\(error); relay log:\n\(relay.log.suffix(4000))")
                }
            }
            let zombie = try RelayProcess(environment: environment)
            try await collect(count / 5, zombie, timeout: .seconds(120))
            zombie.stop()
            var replacement = try RelayProcess(environment: environment)
            try await collect(count, replacement, timeout: .seconds(180))
            #expect(seen.count == count, "the replacement finished every event; log:\n\(replacement.log.suffix(3000))")

            zombie.resume()
            let zombieStatus = await zombie.exit(within: .seconds(60))
            #expect(zombieStatus != nil && zombieStatus != 0, "the resumed zombie exits with a failure; log:\n\(zombie.log.suffix(3000))")
            let zombieFailure = zombie.log.split(separator: "\n").last { $0.contains("relay stopped") }.map(String.init) ?? ""
            #expect(zombieFailure.contains("fenced"), "the zombie says it was fenced; log:\n\(zombie.log.suffix(3000))")
            try await sandbox.produce(Array(events[count...]))
            try await collect(count + later, replacement, timeout: .seconds(120))
            let restarted = seen.count < count + later
            if restarted {
                // The zombie took the membership back before it found its producer fenced, and the
                // replacement was told another member had its instance id. Kubernetes would restart it.
                let status = await replacement.exit(within: .seconds(10))
                #expect(status != nil && status != 0 && replacement.log.contains("fenced"), "log:\n\(replacement.log.suffix(2000))")
                replacement = try RelayProcess(environment: environment)
                try await collect(count + later, replacement, timeout: .seconds(120))
            }
            #expect(seen.count == count + later, "every event has a result; log:\n\(replacement.log.suffix(3000))")
            let status = await replacement.terminate(timeout: .seconds(30))
            #expect(status == 0, "the replacement stops cleanly; log:\n\(replacement.log.suffix(2000))")
            await progress.close()
            let committed = try OutputReader(sandbox: sandbox, logger: logger)
            let keys = try await committed.readPastSentinels(of: results, timeout: .seconds(60)).filter { $0.topic == results }.map(\.keyString)
            await committed.close()
            #expect(Set(keys) == Set(events.map(\.key)), "every event has a committed result")
            #expect(keys.count == events.count, "none of the zombie's records became visible: \(keys.count - Set(keys).count) duplicates")
            print("zombie: \(restarted ? "took the membership back, replacement restarted" : "replacement kept its place"): \(zombieFailure.suffix(300))")
        }
    }

    /// Two relays joining and leaving in turn (SIGTERM and start), one of them always running: each change is
    /// a rebalance whose revocation commits what the leaving partitions finished. A `read_committed` reader
    /// finds exactly one result per event.
    @Test func membersJoiningAndLeavingLeaveExactlyOneCommittedResultPerEvent() async throws {
        try await onNoida { sandbox in
            let count = FaultSize.pick(reduced: 6_000, full: 20_000)
            sandbox.apns.faults.latency = .init(rtt: .milliseconds(20))
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            try await sandbox.produce(events)
            let group = "churn-\(UUID().uuidString.prefix(8))"
            // Dynamic membership: a member with a group instance id does not leave the group when it stops
            // (and noida-db never expires it), so its partitions would wait for it forever.
            let environments = ["relay-a", "relay-b"].map { member in
                var environment = exactlyOnceEnvironment(sandbox, group: group, member: member, staticMembership: false)
                // Revocations drain in well under a second: noida-db mishandles a JoinGroup left waiting for long.
                environment["APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS"] = "200"
                return environment
            }
            let progress = try OutputReader(sandbox: sandbox, logger: logger, readUncommitted: true)
            let results = sandbox.options.topics.results
            var relays: [RelayProcess?] = [try RelayProcess(environment: environments[0]), nil]
            var seen: Set<String> = []
            // A joins; then B joins, A leaves, A joins, B leaves, B joins, A leaves: never no member.
            for (change, member) in [1, 0, 0, 1, 1, 0].enumerated() {
                let target = seen.count + count / 10
                do {
                    seen.formUnion(try await progress.collect(timeout: .seconds(120)) { new in
                        seen.union(new.lazy.filter { $0.topic == results }.map(\.keyString)).count >= target
                    }.filter { $0.topic == results }.map(\.keyString))
                } catch {
                    let logs = relays.compactMap { $0?.log.suffix(3000) }.joined(separator: "\n---\n")
                    throw TestFailure("before change \(change): \(error); logs:\n\(logs)")
                }
                // The member that gets a new assignment from this change: the one joining, or the one staying.
                let settles: RelayProcess
                if let relay = relays[member] {
                    settles = relays[1 - member]!
                    let before = Self.assignments(settles)
                    let status = await relay.terminate(timeout: .seconds(40))
                    #expect(status == 0, "change \(change): the leaving relay stops cleanly; log:\n\(relay.log.suffix(2000))")
                    relays[member] = nil
                    try await Self.settled(settles, after: before, change: change)
                } else {
                    settles = try RelayProcess(environment: environments[member])
                    relays[member] = settles
                    try await Self.settled(settles, after: 0, change: change)
                }
            }
            do {
                _ = try await progress.collect(timeout: .seconds(180)) { new in
                    seen.union(new.lazy.filter { $0.topic == results }.map(\.keyString)).count >= count
                }
            } catch {
                let logs = relays.compactMap { $0?.log.suffix(3000) }.joined(separator: "\n---\n")
                throw TestFailure("\(error); logs:\n\(logs)")
            }
            for relay in relays.compactMap({ $0 }) {
                let status = await relay.terminate(timeout: .seconds(40))
                #expect(status == 0, "log:\n\(relay.log.suffix(2000))")
            }
            await progress.close()
            let committed = try OutputReader(sandbox: sandbox, logger: logger)
            let reading = ContinuousClock.now
            let keys = try await committed.readPastSentinels(of: results, timeout: .seconds(180)).filter { $0.topic == results }.map(\.keyString)
            print("read_committed reader: \(keys.count) results in \(ContinuousClock.now - reading)")
            await committed.close()
            #expect(Set(keys) == Set(events.map(\.key)), "every event has a committed result")
            #expect(keys.count == count, "no committed duplicate across the changes: \(keys.count - Set(keys).count)")
            print("exactly once across 6 membership changes: \(count) events, read_committed \(keys.count) results (\(keys.count - Set(keys).count) duplicates)")
        }
    }

    // MARK: Support

    /// How many assignments `relay` has logged.
    private static func assignments(_ relay: RelayProcess) -> Int {
        relay.log.split(separator: "\n").count { $0.contains(#""message":"partitions assigned""#) }
    }

    /// Waits for `relay`'s next assignment: the group settled after a change. The next change waits for it,
    /// because noida-db never completes a rebalance that a member leaves while another is joining (the
    /// joiner's JoinGroup is never answered; Kafka's coordinator completes it without the leaver).
    private static func settled(_ relay: RelayProcess, after count: Int, change: Int) async throws {
        do {
            try await eventually("change \(change): the group settles", within: .seconds(60)) { assignments(relay) > count }
        } catch {
            throw TestFailure("\(error); log:\n\(relay.log.suffix(3000))")
        }
    }

    func onNoida(_ body: (RelaySandbox) async throws -> Void) async throws {
        let broker = try await NoidaBroker.start()
        do {
            var options = RelaySandbox.Options()
            options.externalBootstrapServers = broker.bootstrapServers
            options.partitions = 4
            try await withSandbox(options, logger: logger, body)
        } catch {
            let log = broker.log
            await broker.stop()
            throw TestFailure("\(error); noida-db's output:\n\(log.suffix(2000))")
        }
        await broker.stop()
    }

    /// The relay's settings for exactly-once on this sandbox: one transactional id and group instance id per
    /// member, the same across its restarts (as a StatefulSet pod's name).
    func exactlyOnceEnvironment(_ sandbox: RelaySandbox, group: String, member: String, staticMembership: Bool = true) -> [String: String] {
        var environment = sandbox.relayEnvironment(groupID: group)
        environment["APNS_RELAY_KAFKA_EXACTLY_ONCE"] = "true"
        environment["APNS_RELAY_KAFKA_TRANSACTIONAL_ID"] = "\(group)-\(member)"
        if staticMembership { environment["APNS_RELAY_KAFKA_GROUP_INSTANCE_ID"] = "\(group)-\(member)" }
        environment["APNS_RELAY_KAFKA_TRANSACTION_INTERVAL_MS"] = "100"
        environment["APNS_RELAY_LOG_LEVEL"] = "info"
        return environment
    }
}
