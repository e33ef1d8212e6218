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
            // About 6 s of backlog for an APNs answering 150 a second; the adaptive limit keeps most of it
            // waiting in the relay, where the order is decided.
            sandbox.apns.faults.latency = .init(rtt: .milliseconds(5), answersPerSecond: 150)
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
            // When each event was taken in (`receivedAt`) and answered (`completedAt`), by the relay's clock.
            // The verdict compares orders from the moment all of app B's pushes were in the relay: on a busy
            // machine B's records may be read a while after A's, and what A answered before that is no
            // question of fairness.
            var times: [String: (received: Int64, completed: Int64)] = [:]
            for record in results {
                guard let json = record.json else { continue }
                #expect(json["outcome"] as? String == "delivered", "\(record.keyString): \(json)")
                if let received = (json["receivedAt"] as? NSNumber)?.int64Value, let completed = (json["completedAt"] as? NSNumber)?.int64Value {
                    times[record.keyString] = (received, completed)
                }
            }
            let a = backlog.compactMap { times[$0.key] }
            let b = other.compactMap { times[$0.key] }
            try #require(a.count == backlog.count && b.count == other.count, "every event has a result with its times")
            let bIn = b.map(\.received).max()!, bDone = b.map(\.completed).max()!
            // A's pushes waiting when B's last arrived: first come, first served would answer every one of them
            // before B's last push; in turn, B's 20 go out beside about as many of A's.
            let waiting = a.filter { $0.received <= bIn && $0.completed > bIn }.count
            let aheadOfB = a.filter { $0.received <= bIn && $0.completed > bIn && $0.completed <= bDone }.count
            print("fair share: when app B's 20 pushes were all in, \(waiting) of app A's were waiting; \(aheadOfB) of those were answered before B's last (first come, first served: all \(waiting))")
            // The backlog lasts 6 s at 150 answers a second and B's records are read right behind A's, so
            // hundreds of A's wait then even on a slow machine; fewer would make the comparison say nothing.
            try #require(waiting >= 100, "app A's backlog was still waiting when app B's pushes arrived (\(waiting) waiting)")
            #expect(aheadOfB < waiting / 2, "app B's last push was answered after \(aheadOfB) of the \(waiting) pushes of app A waiting before it")
        }
    }
}
