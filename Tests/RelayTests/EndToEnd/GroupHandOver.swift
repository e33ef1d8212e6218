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

    /// What every hand-over must show: both relays exit cleanly and every event has a result. Prints the
    /// duplicates under `label`.
    func expectNothingLost(_ label: String) {
        #expect(statusA == 0, "the leaving relay exits cleanly; log:\n\(logA.suffix(2000))")
        #expect(statusB == 0, "log:\n\(logB.suffix(3000))")
        #expect(Set(resultKeys) == Set(eventKeys), "nothing lost across the join and the leave; relay A's log:\n\(logA.suffix(3000))")
        print("\(label): \(eventKeys.count) events, \(duplicates) duplicates")
    }

    /// Runs the hand-over on `sandbox` with `count` events: half before A starts, half once B has started.
    static func run(_ sandbox: RelaySandbox, count: Int = 4000, environment extra: [String: String] = [:], logger: Logger) async throws -> GroupHandOver {
        var run = GroupHandOver()
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
        try await sandbox.produce(Array(events.suffix(count / 2)))
        collected += try await reader.collect(timeout: .seconds(120)) { new in
            collected.filter { $0.topic == results }.count + new.filter { $0.topic == results }.count >= count / 2
        }
        run.statusA = await a.terminate(timeout: .seconds(30))
        let seenBefore = Set(collected.filter { $0.topic == results }.map(\.keyString))
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
        return run
    }
}
