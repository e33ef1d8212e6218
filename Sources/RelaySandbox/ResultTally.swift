import Foundation
import Kafka
import Relay

/// What the relay answered, per input event: counts result records by their Kafka key (the relay keys a
/// result with the event's key), so fault runs can check "every event has a terminal result" and count
/// duplicates, and benchmarks can read the timings.
///
/// A value: each task that reads output keeps its own (`var tally`), so nothing is shared.
package struct ResultTally: Sendable {
    package private(set) var resultsByKey: [String: Int] = [:]
    package private(set) var results = 0
    package private(set) var outcomes: [String: Int] = [:]
    /// Keys whose result says some attempts may have reached APNs unanswered (`possibleDuplicates`).
    package private(set) var possibleDuplicateKeys: Set<String> = []
    /// The `reason` of results that are not `delivered`, counted ("" when they have none).
    package private(set) var reasons: [String: Int] = [:]
    /// (receivedAt, completedAt) of every result, in milliseconds, when `keepTimings` is set.
    package private(set) var timings: [(receivedAt: Int64, completedAt: Int64)] = []
    package let keepTimings: Bool
    private let resultsTopic: String
    private var consumed = 0

    package init(resultsTopic: String, keepTimings: Bool = false) {
        self.resultsTopic = resultsTopic
        self.keepTimings = keepTimings
    }

    /// Results for keys that were never produced are counted too: a key outside `expected` is a bug.
    package var distinctKeys: Int { resultsByKey.count }

    /// Results beyond the first per key.
    package var duplicates: Int { results - resultsByKey.count }

    /// Results completed in the busiest wall-clock second: the relay's peak rate, which sets how much work
    /// can sit between two offset commits.
    package var peakPerSecond: Int { completedPerSecond.values.max() ?? 0 }
    private var completedPerSecond: [Int64: Int] = [:]

    /// The duplicates `changes` disruptions (kills, joins, leaves) of a one-member group can explain.
    package func duplicateBound(changes: Int, maxInFlight: Int) -> Int {
        duplicateBound(membersPerChange: Array(repeating: 1, count: changes), maxInFlight: maxInFlight)
    }

    /// The duplicates a sequence of disruptions can explain, given how many members were in the group at
    /// each. Per disruption: the events in flight at every member (with the eager protocol each member is
    /// revoked and drains, and librdkafka's mock coordinator refuses the commit on revoke while the group is
    /// rebalancing, so the next owner redoes them), plus the work finished since the last commit that
    /// counted, at the peak rate, over `uncommittedWindow`; never less than twice the in-flight bound.
    ///
    /// - Parameter uncommittedWindow: how long finished work can go uncommitted. Without a rebalance, one
    ///   auto-commit interval and a round trip (a quarter second here). A join adds the time until every
    ///   member hears of the rebalance: the mock coordinator refuses their commits from the joiner's
    ///   JoinGroup on, and a member hears of it in its next heartbeat's answer (`heartbeat.interval.ms`).
    package func duplicateBound(membersPerChange: [Int], maxInFlight: Int, uncommittedWindow: Duration = .milliseconds(250)) -> Int {
        let uncommitted = Int(Double(peakPerSecond) * (Double(uncommittedWindow / .milliseconds(1)) / 1000))
        return membersPerChange.reduce(0) { $0 + max(2 * maxInFlight, max(1, $1) * maxInFlight + uncommitted) }
    }

    /// The keys of `expected` that have no result yet.
    package func missing(_ expected: some Sequence<String>) -> [String] {
        expected.filter { resultsByKey[$0] == nil }
    }

    /// Reads output until every key in `expected` has a result, or `timeout` passes.
    /// - Throws: `RelayError` naming how many (and a few of which) keys were still without a result.
    package mutating func collect(from reader: OutputReader, expected: Set<String>, timeout: Duration) async throws {
        consumed = 0
        var remaining = expected.subtracting(resultsByKey.keys)
        do {
            _ = try await reader.collect(timeout: timeout) { records in
                // Called after every record: look only at the ones not seen yet (O(n) in total).
                while consumed < records.count {
                    let record = records[consumed]
                    add(record)
                    if record.topic == resultsTopic, let key = record.key { remaining.remove(String(decoding: key, as: UTF8.self)) }
                    consumed += 1
                }
                return remaining.isEmpty
            }
        } catch {
            throw RelayError("\(remaining.count) of \(expected.count) events still have no result (e.g. \(remaining.sorted().prefix(5))): \(error)")
        }
    }

    /// Reads output until `count` results arrived in total (any keys), or `timeout` passes.
    package mutating func collect(from reader: OutputReader, untilResults count: Int, timeout: Duration) async throws {
        consumed = 0
        _ = try await reader.collect(timeout: timeout) { records in
            while consumed < records.count {
                add(records[consumed])
                consumed += 1
            }
            return results >= count
        }
    }

    private mutating func add(_ record: OutputReader.Record) {
        guard record.topic == resultsTopic else { return }
        let key = record.key.map { String(decoding: $0, as: UTF8.self) } ?? ""
        resultsByKey[key, default: 0] += 1
        results += 1
        if let json = record.json {
            let outcome = json["outcome"] as? String ?? "?"
            outcomes[outcome, default: 0] += 1
            if outcome != "delivered" { reasons[json["reason"] as? String ?? "", default: 0] += 1 }
            if let flagged = json["possibleDuplicates"] as? Int, flagged > 0 { possibleDuplicateKeys.insert(key) }
            if let completed = (json["completedAt"] as? NSNumber)?.int64Value {
                completedPerSecond[completed / 1000, default: 0] += 1
            }
            if keepTimings, let received = (json["receivedAt"] as? NSNumber)?.int64Value,
                let completed = (json["completedAt"] as? NSNumber)?.int64Value
            {
                timings.append((received, completed))
            }
        } else {
            outcomes["unparseable", default: 0] += 1
        }
    }
}
