import APNsMock
import Foundation
import Logging
import RelaySandbox
import Testing

/// One app's backlog does not starve another's (issue #24, fair share per app): requests waiting for APNs
/// are served one app at a time, in turn, so a few pushes of app B produced behind a backlog of app A are
/// answered long before that backlog is.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct FairShareTests {
    let logger = Logger.quiet("fair-share")

    @Test func anotherAppsPushesDoNotWaitBehindOneAppsBacklog() async throws {
        try await withSandbox(logger: logger) { sandbox in
            // About 3 s of backlog for an APNs answering 300 a second; the adaptive limit keeps most of it
            // waiting in the relay, where the order is decided.
            sandbox.apns.faults.latency = .init(rtt: .milliseconds(5), answersPerSecond: 300)
            let backlog = (0..<900).map { n in
                (key: "a\(n)", value: SampleEvents.event(id: "a\(n)", deviceToken: SampleEvents.token(n), topic: "com.example.a"))
            }
            let other = (0..<20).map { n in
                (key: "b\(n)", value: SampleEvents.event(id: "b\(n)", deviceToken: SampleEvents.token(1000 + n), topic: "com.example.b"))
            }
            try await sandbox.produce(backlog)
            try await sandbox.produce(other)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = try await withRelay(sandbox, logger: logger) { _ in
                try await reader.results(count: backlog.count + other.count, timeout: .seconds(120))
            }
            await reader.close()
            // When each result was completed (its `completedAt`): the order APNs answered them in. Compared as
            // an order, not as latencies, so that a slow start (connecting on a loaded machine) delays both
            // apps alike and proves nothing either way.
            var completed: [String: Int64] = [:]
            for record in results {
                guard let json = record.json else { continue }
                #expect(json["outcome"] as? String == "delivered", "\(record.keyString): \(json)")
                completed[record.keyString] = (json["completedAt"] as? NSNumber)?.int64Value
            }
            let a = backlog.compactMap { completed[$0.key] }.sorted()
            let b = other.compactMap { completed[$0.key] }.sorted()
            try #require(a.count == backlog.count && b.count == other.count, "every event has a result with its completion time")
            let aheadOfB = a.filter { $0 <= b.last! }.count
            print("fair share: app B's 20 pushes were all answered after \(aheadOfB) of app A's 900 (first come, first served: after all 900)")
            // First come, first served, every one of B's pushes would wait for the whole backlog; in turn, the
            // last of them is answered before half of A's backlog is.
            #expect(aheadOfB < backlog.count / 2, "app B's last push was answered after \(aheadOfB) of app A's \(backlog.count)")
        }
    }
}
