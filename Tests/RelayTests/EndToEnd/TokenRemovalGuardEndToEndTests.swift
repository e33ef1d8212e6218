import APNsCore
import Foundation
import Logging
import Relay
import RelaySandbox
import TestSupport
import Testing

/// A misconfiguration must not wipe a token database: with the mock APNs answering BadDeviceToken for most
/// tokens, the relay still says BadDeviceToken in every result but withholds the removed-token records;
/// in a normal mix every BadDeviceToken gets its record; 410s are always published.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct TokenRemovalGuardEndToEndTests {
    let logger = Logger.quiet("guard-e2e")

    /// `apns-relay run` in its own process, so the Prometheus metrics and the JSON log are the user's.
    @Test func aBadDeviceTokenBurstWithholdsRemovalsButStillPublishes410sAndCountsTheRest() async throws {
        try await withSandbox(logger: logger) { sandbox in
            // 170 tokens of the other environment (BadDeviceToken), 10 gone (410), 20 fine: 85 % BadDeviceToken.
            let bad = 170, gone = 10, fine = 20
            var events: [(key: String, value: [UInt8])] = []
            var expected: [String: String] = [:]
            let since: Int64 = 1_700_000_000_123
            for n in 0..<(bad + gone + fine) {
                let token = SampleEvents.token(n, salt: 0x6A4D)
                let key = "k\(n)"
                if n % 20 == 3 {
                    sandbox.apns.registry.unregister(token, sinceMilliseconds: since)
                    expected[key] = "unregistered"
                } else if n % 10 == 7 {
                    expected[key] = "delivered"
                } else {
                    sandbox.apns.registry.register(token, environment: .production)
                    expected[key] = "BadDeviceToken"
                }
                events.append((key: key, value: SampleEvents.event(id: "e\(n)", deviceToken: token)))
            }
            #expect(expected.values.filter { $0 == "BadDeviceToken" }.count == bad)
            let port = String(try freeLocalPort())
            var environment = sandbox.relayEnvironment(groupID: "guard-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_LOG_LEVEL"] = "info"
            environment["APNS_RELAY_ADMIN_HOST"] = "127.0.0.1"
            environment["APNS_RELAY_ADMIN_PORT"] = port
            environment["APNS_RELAY_RELAY_TOKEN_REMOVAL_MINIMUM_SAMPLE"] = "20"
            let relay = try RelayProcess(environment: environment)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            try await sandbox.produce(events)
            let topics = sandbox.options.topics
            var records = try await reader.results(count: events.count, timeout: .seconds(90))

            // Every answer is counted once its event's records are acknowledged; then the published
            // removals (410s included) and the withheld ones add up to every removal APNs asked for.
            let metricsURL = "http://127.0.0.1:\(port)/metrics"
            let withheldSeries = #"apns_relay_removed_tokens_suppressed_total{credential="default",environment="development"}"#
            try await eventually("published and withheld removals add up to \(bad + gone)", within: .seconds(30)) {
                let text = try await http(metricsURL).body
                return (metric(text, "apns_relay_removed_tokens_total") ?? 0) + (series(text, withheldSeries) ?? 0) == Double(bad + gone)
            }
            let text = try await http(metricsURL).body
            let published = Int(metric(text, "apns_relay_removed_tokens_total") ?? -1)
            let withheld = Int(series(text, withheldSeries) ?? -1)
            #expect(series(text, #"apns_relay_token_removal_guard_tripped{credential="default",environment="development"}"#) == 1, "\(text.prefix(4000))")
            let removedSoFar = records.filter { $0.topic == topics.removedTokens }.count
            if removedSoFar < published {
                records += try await reader.collect(timeout: .seconds(30)) { $0.filter { $0.topic == topics.removedTokens }.count >= published - removedSoFar }
            }
            #expect(await relay.terminate(timeout: .seconds(20)) == 0)
            await reader.close()

            let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            for (key, what) in expected {
                let result = try #require(results[key], "no result for \(key)")
                switch what {
                case "BadDeviceToken":
                    #expect(result["outcome"] as? String == "rejected" && result["reason"] as? String == "BadDeviceToken", "\(key): \(result)")
                case "unregistered":
                    #expect(result["outcome"] as? String == "unregistered", "\(key): \(result)")
                default:
                    #expect(result["outcome"] as? String == "delivered", "\(key): \(result)")
                }
            }
            let removed = records.filter { $0.topic == topics.removedTokens }.compactMap(\.json)
            #expect(removed.count == published)
            #expect(removed.filter { $0["reason"] as? String == "Unregistered" }.count == gone, "every 410 is published")
            #expect(removed.allSatisfy { $0["reason"] as? String != "Unregistered" || $0["invalidatedAt"] as? Int64 == since })
            let badRemovals = removed.filter { $0["reason"] as? String == "BadDeviceToken" }.count
            // A BadDeviceToken removal is published only while fewer than half the answers so far are
            // BadDeviceToken, so at most (other answers - 1) of them can be: 29 of 170.
            #expect(badRemovals < gone + fine, "\(badRemovals) BadDeviceToken removals published")
            #expect(badRemovals + withheld == bad, "published \(badRemovals) + withheld \(withheld)")
            let log = relay.log
            let critical = log.split(separator: "\n").filter { $0.contains(#""level":"critical""#) && $0.contains("withholding BadDeviceToken") }
            #expect(critical.count == 1, "one critical line when the guard trips:\n\(log.suffix(3000))")
        }
    }

    @Test func aFewBadDeviceTokensInANormalMixEachGetTheirRemovedTokenRecord() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let badTokens = (0..<3).map { SampleEvents.token($0, salt: 0xBAD) }
            for token in badTokens { sandbox.apns.registry.register(token, environment: .production) }
            let normal = (0..<60).map { n in (key: "n\(n)", value: SampleEvents.event(id: "n\(n)", deviceToken: SampleEvents.token(n))) }
            var mix = (60..<117).map { n in (key: "n\(n)", value: SampleEvents.event(id: "n\(n)", deviceToken: SampleEvents.token(n))) }
            for (i, token) in badTokens.enumerated() {
                mix.insert((key: "bad\(i)", value: SampleEvents.event(id: "bad\(i)", deviceToken: token)), at: 20 * i + 10)
            }
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let overrides = ["relay.tokenRemoval.minimumSample": "20", "relay.tokenRemoval.windowMs": "600000"]
            let records = try await withRelay(sandbox, overrides: overrides, logger: logger) { _ in
                // Normal traffic first: a BadDeviceToken is published once the window shows it is plausible.
                try await sandbox.produce(normal)
                var records = try await reader.results(count: normal.count, timeout: .seconds(60))
                try await sandbox.produce(mix)
                records += try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= mix.count
                        && records.filter { $0.topic == topics.removedTokens }.count >= badTokens.count
                }
                return records
            }
            await reader.close()
            let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            for i in badTokens.indices {
                #expect(results["bad\(i)"]?["reason"] as? String == "BadDeviceToken", "\(results["bad\(i)"] ?? [:])")
            }
            let removed = Dictionary(records.filter { $0.topic == topics.removedTokens }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            #expect(Set(removed.keys) == Set(badTokens), "one removed-token record per BadDeviceToken")
            #expect(removed.values.allSatisfy { $0["reason"] as? String == "BadDeviceToken" })
        }
    }
}

/// The value of the sample line of `series` (name and labels in the order given, or any order).
private func series(_ text: String, _ series: String) -> Double? {
    if let exact = metric(text, series) { return exact }
    guard let brace = series.firstIndex(of: "{") else { return nil }
    let name = series[..<brace]
    let labels = Set(series[series.index(after: brace)...].dropLast().split(separator: ","))
    for line in text.split(separator: "\n") where line.hasPrefix(name + "{") {
        guard let close = line.firstIndex(of: "}") else { continue }
        let lineLabels = Set(line[line.index(after: line.firstIndex(of: "{")!)..<close].split(separator: ","))
        if lineLabels == labels {
            return Double(line[line.index(after: close)...].trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
    }
    return nil
}
