import Foundation
import Logging
import RelaySandbox
import TestSupport
import Testing

/// Two relays in one group, as in a rolling deployment: relay A works alone, relay B joins mid-stream (a
/// rebalance), A is stopped with SIGTERM (its drain and leave hand its partitions to B), and B finishes.
struct GroupHandOver {
    /// Every result record's key, in the order read (a duplicate appears twice).
    var resultKeys: [String] = []
    var eventKeys: [String] = []
    var logA = ""
    var logB = ""
    var statusA: Int32?
    var statusB: Int32?

    var duplicates: Int { resultKeys.count - Set(resultKeys).count }
    /// The input partitions relay A held when it was told to leave (from its log).
    var partitionsA: Set<Int> = []
    /// Results written after relay A left for positions of its partitions: all of them, and those that redo
    /// a position whose result was already written before it left.
    var handedOver = 0
    var redoneAfterLeave: [String] = []
    var judgesTheLeave = true

    /// What every hand-over must show: both relays exit cleanly, every event has a result, and the leave
    /// redoes nothing. Prints the duplicates under `label`.
    ///
    /// A SIGTERM leave drains what the leaving relay has in flight, stores every finished offset and commits
    /// them (`rd_kafka_consumer_close`) before it sends LeaveGroup, while its generation is still current, so
    /// the next owner of its partitions starts after the last result it wrote: the bound on the leave's
    /// duplicates is 0. (The join's duplicates are another matter, printed, not bounded: both test brokers
    /// refuse the old generation's commits once a rebalance begins, see
    /// `SecondBrokerTests.twoRelaysHandOverTheGroupOnASecondBrokerAndNothingIsLost`, and what the relays
    /// finished meanwhile depends on timing.) Only positions of the leaving relay's own partitions count:
    /// the remaining relay may redo its own work when the leave revokes it too, for the same reason.
    func expectNothingLost(_ label: String) {
        #expect(statusA == 0, "the leaving relay exits cleanly; log:\n\(logA.suffix(2000))")
        #expect(statusB == 0, "log:\n\(logB.suffix(3000))")
        #expect(Set(resultKeys) == Set(eventKeys), "nothing lost across the join and the leave; relay A's log:\n\(logA.suffix(3000))")
        guard judgesTheLeave else {
            print("\(label): \(eventKeys.count) events, \(duplicates) duplicates, \(redoneAfterLeave.count) redone after the leave (not bounded)")
            return
        }
        #expect(!partitionsA.isEmpty, "relay A held partitions when it left; log:\n\(logA.suffix(3000))")
        #expect(handedOver > 0, "relay B wrote results for relay A's partitions \(partitionsA.sorted()) after A left: the leave handed work over")
        #expect(
            redoneAfterLeave.isEmpty,
            "a SIGTERM leave commits everything it finished, yet \(redoneAfterLeave.count) results for relay A's partitions \(partitionsA.sorted()) were written again after it left, e.g. \(redoneAfterLeave.prefix(5)); relay A's log:\n\(logA.suffix(3000))")
        print("\(label): \(eventKeys.count) events, \(duplicates) duplicates, \(redoneAfterLeave.count) redone after the leave (bound 0) of \(handedOver) results for the leaving relay's partitions \(partitionsA.sorted())")
    }

    /// The input partitions a relay holds by its JSON log: the last assignment (the eager protocol's is
    /// whole each time), less what was revoked or lost since.
    static func currentAssignment(in log: String, topic: String) -> Set<Int> {
        let pattern = try! Regex("\(NSRegularExpression.escapedPattern(for: topic))\\[([0-9]+)\\]")
        var current: Set<Int> = []
        for line in log.split(separator: "\n") where line.contains(#""message":"partitions "#) {
            guard let field = line.firstRange(of: #""partitions":""#) else { continue }
            let value = line[field.upperBound...].prefix { $0 != "\"" }
            let partitions = Set(value.matches(of: pattern).compactMap { match in match.output[1].substring.flatMap { Int($0) } })
            if line.contains(#""message":"partitions assigned""#) {
                current = partitions
            } else if line.contains(#""message":"partitions revoked"#) || line.contains(#""message":"partitions lost"#) {
                current.subtract(partitions)
            }
        }
        return current
    }

    /// A result's source position (input partition, offset), from its `source` object.
    static func sourcePosition(_ record: OutputReader.Record) -> (partition: Int, offset: Int)? {
        guard let source = record.json?["source"] as? [String: any Sendable],
              let partition = source["partition"] as? Int, let offset = source["offset"] as? Int else { return nil }
        return (partition, offset)
    }

    /// Runs the hand-over on `sandbox` with `count` events: half before A starts, a quarter once both relays
    /// hold partitions, the last quarter once A has left.
    /// - Parameter judgesTheLeave: false keeps the join and the leave apart in time only by the results'
    ///   count, without waiting for a settled group; the leave's duplicates are then printed, not bounded.
    static func run(
        _ sandbox: RelaySandbox, count: Int = 4000, environment extra: [String: String] = [:], judgesTheLeave: Bool = true, logger: Logger
    ) async throws -> GroupHandOver {
        var run = GroupHandOver()
        run.judgesTheLeave = judgesTheLeave
        let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
        run.eventKeys = events.map(\.key)
        var environment = sandbox.relayEnvironment(groupID: "pair-\(UUID().uuidString.prefix(8))")
        environment["APNS_RELAY_LOG_LEVEL"] = "info"
        environment["APNS_RELAY_KAFKA_AUTO_COMMIT_INTERVAL_MS"] = "200"
        environment.merge(extra) { $1 }
        let reader = try OutputReader(sandbox: sandbox, logger: logger)
        let results = sandbox.options.topics.results
        try await sandbox.produce(Array(events.prefix(count / 2)))

        let a = try RelayProcess(environment: environment)
        var collected = try await reader.collect(timeout: .seconds(120)) { $0.filter { $0.topic == results }.count >= count / 8 }
        let b = try RelayProcess(environment: environment)  // joins mid-stream: a rebalance
        // The leave is judged in a settled group: both relays hold partitions of one generation. (A leave
        // during a join phase has its final commit refused by both test brokers, and B redoes A's work.)
        let topic = sandbox.options.inputTopic
        let all = Set(0..<sandbox.options.partitions)
        if judgesTheLeave { do {
            try await eventually("both relays hold partitions of one generation", within: .seconds(120), every: .milliseconds(100)) {
                let (held, joined) = (currentAssignment(in: a.log, topic: topic), currentAssignment(in: b.log, topic: topic))
                return !held.isEmpty && !joined.isEmpty && held.isDisjoint(with: joined) && held.union(joined) == all
            }
        } catch {
            throw TestFailure("\(error); relay A's log:\n\(a.log.suffix(2000))\nrelay B's log:\n\(b.log.suffix(2000))")
        } }
        try await sandbox.produce(Array(events[(count / 2)..<(judgesTheLeave ? 3 * count / 4 : count)]))
        collected += try await reader.collect(timeout: .seconds(120)) { new in
            collected.filter { $0.topic == results }.count + new.filter { $0.topic == results }.count >= count / 2
        }
        run.partitionsA = currentAssignment(in: a.log, topic: topic)
        run.statusA = await a.terminate(timeout: .seconds(30))
        // A has exited: everything it wrote is in the results by now, so reading them to their end offsets
        // splits what A wrote from what was written after it left. The last quarter comes after, so that
        // A's partitions have work for their next owner whatever A had finished.
        collected += try await reader.readToEnd(of: results, timeout: .seconds(60))
        let writtenBeforeLeave = collected.count
        let seenBefore = Set(collected.filter { $0.topic == results }.map(\.keyString))
        if judgesTheLeave { try await sandbox.produce(Array(events[(3 * count / 4)...])) }
        collected += try await reader.collect(timeout: .seconds(120)) { new in
            seenBefore.union(new.filter { $0.topic == results }.map(\.keyString)).count >= count
        }
        run.statusB = await b.terminate(timeout: .seconds(30))
        // Both relays have stopped: read the results to their end, so that a late duplicate is counted too.
        collected += try await reader.readToEnd(of: results, timeout: .seconds(30))
        await reader.close()
        run.resultKeys = collected.filter { $0.topic == results }.map(\.keyString)
        run.logA = a.log
        run.logB = b.log
        struct Position: Hashable { var partition: Int, offset: Int }
        let before = Set(collected.prefix(writtenBeforeLeave).filter { $0.topic == results }.compactMap(sourcePosition).map { Position(partition: $0.partition, offset: $0.offset) })
        for record in collected.dropFirst(writtenBeforeLeave) where record.topic == results {
            guard let position = sourcePosition(record), run.partitionsA.contains(position.partition) else { continue }
            run.handedOver += 1
            if before.contains(Position(partition: position.partition, offset: position.offset)) {
                run.redoneAfterLeave.append("\(record.keyString) (input[\(position.partition)]@\(position.offset))")
            }
        }
        return run
    }
}
