import Foundation
import Synchronization
import Logging
import RelaySandbox
import TestSupport
import Testing

/// `relay.maxEventAgeMs`: an event older than it (by its Kafka timestamp) is answered `expired` unsent. A new
/// consumer group starts at the oldest retained event, and an event with no `expiration` would otherwise be
/// pushed however old it is.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct MaxEventAgeTests {
    let logger = Logger.quiet("max-age")

    private static let threeDays: Int64 = 3 * 86_400_000

    /// Two events, one produced with a create time three days ago and one now; results by key, and whether
    /// APNs got a request for each.
    private func results(overrides: [String: String]) async throws -> (results: [String: [String: Any]], requested: (old: Bool, fresh: Bool)) {
        let oldToken = SampleEvents.token(1), freshToken = SampleEvents.token(2)
        let (records, old, fresh) = try await withSandbox(logger: logger) { sandbox in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            try await sandbox.produce(records: [
                .init(key: Array("old".utf8), value: SampleEvents.event(id: "old", deviceToken: oldToken), timestampMilliseconds: now - Self.threeDays),
                .init(key: Array("fresh".utf8), value: SampleEvents.event(id: "fresh", deviceToken: freshToken)),
            ])
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let records = try await withRelay(sandbox, overrides: overrides, logger: logger) { _ in
                try await reader.results(count: 2, timeout: .seconds(90))
            }
            await reader.close()
            let tokens = sandbox.apns.statistics.deviceTokens
            return (records, tokens[oldToken] != nil, tokens[freshToken] != nil)
        }
        return (Dictionary(records.map { ($0.keyString, $0.json ?? [:]) }) { first, _ in first }, (old, fresh))
    }

    @Test func aThreeDayOldEventIsAnsweredExpiredWithoutAPush() async throws {
        let (results, requested) = try await results(overrides: ["relay.maxEventAgeMs": "3600000"])
        let old = try #require(results["old"], "a result for the old event")
        #expect(old["outcome"] as? String == "expired", "\(old)")
        #expect(old["reason"] as? String == "MaxEventAgeExceeded", "\(old)")
        #expect(old["attempts"] as? Int == 0)
        #expect((old["message"] as? String)?.contains("relay.maxEventAgeMs is 3600000") == true, "\(old)")
        #expect(!requested.old, "APNs got no request for the old event")
        #expect(results["fresh"]?["outcome"] as? String == "delivered", "\(results["fresh"] ?? [:])")
        #expect(requested.fresh)
    }

    /// The control: the same two events with the default (any age) are both pushed.
    @Test func withoutAMaximumAgeTheOldEventIsPushed() async throws {
        let (results, requested) = try await results(overrides: [:])
        #expect(results["old"]?["outcome"] as? String == "delivered", "\(results["old"] ?? [:])")
        #expect(requested.old && requested.fresh)
    }

    /// `kafka.autoOffsetReset: latest`: a new group skips what was produced before it joined. Probes are produced
    /// until one is delivered (the group's start offset is resolved after it joins, so a probe may land before it);
    /// the event produced before the relay started must then have no result.
    @Test func aNewGroupStartingAtLatestSkipsEarlierEvents() async throws {
        var options = RelaySandbox.Options()
        options.partitions = 1
        try await withSandbox(options, logger: logger) { sandbox in
            try await sandbox.produce([(key: "before", value: SampleEvents.event(id: "before", deviceToken: SampleEvents.token(1)))])
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let probe = Counter()
            let seen = Mutex<[String]>([])
            try await withRelay(sandbox, overrides: ["kafka.autoOffsetReset": "latest"], logger: logger) { app in
                try await eventually("the relay is ready", within: .seconds(60)) { app.relay.readiness == nil }
                try await eventually("a probe produced after the relay joined is delivered", within: .seconds(60), every: .milliseconds(200)) {
                    let n = probe.next()
                    try await sandbox.produce([(key: "probe-\(n)", value: SampleEvents.event(id: "probe-\(n)", deviceToken: SampleEvents.token(100 + n)))])
                    let read = try await reader.read(for: .milliseconds(300)).map(\.keyString)
                    seen.withLock { $0 += read }
                    return read.contains { $0.hasPrefix("probe-") }
                }
                let rest = try await reader.readToEnd(of: sandbox.options.topics.results, timeout: .seconds(30)).map(\.keyString)
                seen.withLock { $0 += rest }
            }
            await reader.close()
            let keys = seen.withLock { $0 }
            #expect(sandbox.apns.statistics.deviceTokens[SampleEvents.token(1)] == nil, "the event produced before the group joined was not pushed")
            #expect(!keys.contains("before"), "\(keys)")
            #expect(keys.contains { $0.hasPrefix("probe-") })
        }
    }
}

/// A count shared with the condition `eventually` calls.
private final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
