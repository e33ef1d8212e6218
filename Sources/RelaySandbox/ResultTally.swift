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

    /// Counts records read some other way (a reader that runs for hours reads in slices: `collect` keeps
    /// every record of its call).
    package mutating func add(_ records: [OutputReader.Record]) {
        for record in records { add(record) }
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
