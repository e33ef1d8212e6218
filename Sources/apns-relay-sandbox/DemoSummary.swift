import APNsMock
import Foundation
import Relay
import RelaySandbox

/// The demo's closing report, and the checks that make the demo fail loudly if the relay misbehaved.
struct DemoSummary {
    let text: String
    let problems: [String]

    init(scenario: DemoScenario, records: [OutputReader.Record], topics: RelayConfiguration.Topics, elapsed: Duration, apns: MockStatistics) {
        let results = records.filter { $0.topic == topics.results }.compactMap(\.json)
        let removed = records.filter { $0.topic == topics.removedTokens }.compactMap(\.json)
        let removedChannels = records.filter { $0.topic == topics.removedChannels }.compactMap(\.json)
        let deadLetters = records.filter { $0.topic == topics.deadLetters }

        var byOutcome: [String: Int] = [:]
        var byReason: [String: Int] = [:]
        var latencies: [Int] = []
        var attempts = 0
        var firstReceived = Int.max
        var lastCompleted = 0
        for result in results {
            firstReceived = min(firstReceived, result["receivedAt"] as? Int ?? Int.max)
            lastCompleted = max(lastCompleted, result["completedAt"] as? Int ?? 0)
            let outcome = result["outcome"] as? String ?? "?"
            byOutcome[outcome, default: 0] += 1
            if let reason = result["reason"] as? String { byReason["\(outcome): \(reason)", default: 0] += 1 }
            if outcome == "delivered", let latency = result["latencyMs"] as? Int { latencies.append(latency) }
            attempts += result["attempts"] as? Int ?? 0
        }
        latencies.sort()
        func percentile(_ p: Double) -> Int { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }

        var lines: [String] = []
        lines.append("Summary")
        let busy = Double(max(1, lastCompleted - firstReceived)) / 1000
        #if DEBUG
        let build = " (a debug build; `make release` then `.build/release/apns-relay demo` runs several times faster)"
        #else
        let build = " (release build)"
        #endif
        lines.append("  events: \(scenario.events.count) bulk + \(scenario.urgent.count) urgent   results: \(results.count)   relay busy \(String(format: "%.2f", busy)) s (first event read → last result durable) → \(Int(Double(results.count) / busy)) events/s\(build)")
        lines.append("  wall time from relay start (group join included): \(format(elapsed))")
        lines.append("  latency (consume → result durable), delivered events: p50 \(percentile(0.5)) ms, p99 \(percentile(0.99)) ms")
        lines.append(Self.urgentLine(scenario: scenario, results: results))
        lines.append("  APNs attempts: \(attempts) (retries after the 503 burst included); mock APNs saw \(apns.requests) requests on \(apns.connectionsOpened) connection(s), accepted \(apns.accepted) device pushes and \(apns.acceptedBroadcasts) broadcasts")
        lines.append("")
        var expectedByOutcome: [String: Int] = [:]
        for event in scenario.allEvents { expectedByOutcome[event.expected.rawValue, default: 0] += 1 }
        lines.append("  outcome        expected  got")
        for outcome in Set(expectedByOutcome.keys).union(byOutcome.keys).sorted(by: { (expectedByOutcome[$0] ?? 0, $0) > (expectedByOutcome[$1] ?? 0, $1) }) {
            let expected = expectedByOutcome[outcome] ?? 0
            let got = byOutcome[outcome] ?? 0
            let mark = expected == got ? "" : "   <- differs"
            lines.append("  " + outcome.padding(toLength: 14, withPad: " ", startingAt: 0) + " " + String(expected).padding(toLength: 9, withPad: " ", startingAt: 0) + " " + String(got) + mark)
        }
        lines.append("")
        lines.append("  by reason")
        for (reason, count) in byReason.sorted(by: { $0.key < $1.key }) {
            lines.append("    " + reason.padding(toLength: 44, withPad: " ", startingAt: 0) + " " + String(count))
        }
        lines.append("")
        lines.append("  removed-token records: \(removed.count)   removed-channel records: \(removedChannels.count)   dead letters: \(deadLetters.count)")
        lines.append("")
        lines.append("  a few result records:")
        var shown = Set<String>()
        for record in records where record.topic == topics.results {
            guard let json = record.json, let outcome = json["outcome"] as? String, shown.insert(outcome).inserted else { continue }
            lines.append("    " + String(decoding: record.value, as: UTF8.self))
        }
        if let broadcast = records.first(where: { $0.topic == topics.results && $0.json?["apnsRequestId"] is String }) {
            lines.append("  a broadcast's result:")
            lines.append("    " + String(decoding: broadcast.value, as: UTF8.self))
        }
        if let first = removed.first, let data = try? JSONSerialization.data(withJSONObject: first, options: [.sortedKeys]) {
            lines.append("  a removed-token record:")
            lines.append("    " + String(decoding: data, as: UTF8.self))
        }
        if let first = removedChannels.first, let data = try? JSONSerialization.data(withJSONObject: first, options: [.sortedKeys, .withoutEscapingSlashes]) {
            lines.append("  a removed-channel record:")
            lines.append("    " + String(decoding: data, as: UTF8.self))
        }
        if let letter = deadLetters.first {
            lines.append("  a dead letter's headers:")
            for header in letter.headers where header.name.hasPrefix("__connect") {
                lines.append("    \(header.name): \(String(decoding: header.value ?? [], as: UTF8.self).prefix(120))")
            }
        }

        // Checks: exactly one result per event, each with the outcome the scenario implies.
        var problems: [String] = []
        var seen: [String: Int] = [:]
        for record in records where record.topic == topics.results {
            if let key = record.key { seen[String(decoding: key, as: UTF8.self), default: 0] += 1 }
        }
        let missing = scenario.allEvents.filter { seen[$0.key] == nil }
        if !missing.isEmpty { problems.append("\(missing.count) events have no result (first: \(missing[0].key))") }
        let duplicated = seen.filter { $0.value > 1 }
        if !duplicated.isEmpty { lines.append("  note: \(duplicated.count) events have more than one result (allowed after a crash or rebalance)") }
        let expected = Dictionary(uniqueKeysWithValues: scenario.allEvents.map { ($0.key, $0) })
        var mismatches = 0
        for record in records where record.topic == topics.results {
            guard let key = record.key.map({ String(decoding: $0, as: UTF8.self) }), let event = expected[key],
                let outcome = record.json?["outcome"] as? String
            else { continue }
            if outcome != event.expected.rawValue {
                mismatches += 1
                if mismatches <= 5 { problems.append("\(key) (\(event.label)): expected \(event.expected.rawValue), got \(outcome)") }
            }
        }
        self.text = lines.joined(separator: "\n")
        self.problems = problems
    }

    /// How the urgent lane did: its events' consume → result times, and how many bulk events read before
    /// them they were answered ahead of (in one queue they would have waited behind every one).
    private static func urgentLine(scenario: DemoScenario, results: [[String: Any]]) -> String {
        let urgentIDs = Set(scenario.urgent.map(\.key))
        var urgent: [(received: Int, completed: Int)] = []
        var bulk: [(received: Int, completed: Int)] = []
        for result in results {
            guard let received = result["receivedAt"] as? Int, let completed = result["completedAt"] as? Int else { continue }
            if let id = result["id"] as? String, urgentIDs.contains(id) {
                urgent.append((received, completed))
            } else {
                bulk.append((received, completed))
            }
        }
        guard !urgent.isEmpty else { return "  urgent lane: no urgent result" }
        let times = urgent.map { $0.completed - $0.received }.sorted()
        let firstUrgentRead = urgent.map(\.received).min()!
        let lastUrgentDone = urgent.map(\.completed).max()!
        let overtaken = bulk.filter { $0.received <= firstUrgentRead && $0.completed > lastUrgentDone }.count
        return "  urgent lane: \(urgent.count) sign-in codes, consume → result p50 \(times[times.count / 2]) ms, max \(times.last!) ms; answered ahead of \(overtaken) bulk events read before them"
    }
}
