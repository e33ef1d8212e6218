import Foundation
import Logging
import RelaySandbox
import TestSupport
import Testing
import APNsMock

/// `apns-relay run` as users run it: separate processes, configured by environment variables, stopped by
/// signals, watched through the admin endpoint.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct RelayProcessTests {
    let logger = Logger.quiet("process")

    private func environment(_ sandbox: RelaySandbox, group: String, extra: [String: String] = [:]) -> [String: String] {
        var environment = sandbox.relayEnvironment(groupID: group)
        environment["APNS_RELAY_LOG_LEVEL"] = "info"
        environment["APNS_RELAY_KAFKA_AUTO_COMMIT_INTERVAL_MS"] = "200"
        return environment.merging(extra) { $1 }
    }

    /// A SIGTERM under load drains what is in flight, commits and exits 0; the next relay redoes nothing.
    /// The drain deadline (20 s) is far above what draining takes here (at most 1,000 events in flight to a
    /// mock that answers in milliseconds), so a drain that runs into it is a failure, not another branch.
    @Test func sigtermUnderLoadExitsCleanlyWithinTheDrainDeadlineAndRestartAddsNoDuplicates() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 3000
            let maxInFlight = 1000
            let drain = Duration.seconds(20)
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            try await sandbox.produce(events)
            let env = environment(sandbox, group: "term-\(UUID().uuidString.prefix(8))", extra: [
                "APNS_RELAY_RELAY_DRAIN_TIMEOUT_MS": String(drain.components.seconds * 1000),
                "APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS": String(maxInFlight),
            ])
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = sandbox.options.topics.results

            let first = try RelayProcess(environment: env)
            var collected = try await reader.collect(timeout: .seconds(120)) { $0.filter { $0.topic == results }.count >= count / 3 }
            let stopStart = ContinuousClock.now
            let status = await first.terminate(timeout: drain + .seconds(25))
            let stopTime = ContinuousClock.now - stopStart
            #expect(status == 0, "SIGTERM exits 0; log:\n\(first.log.suffix(3000))")
            // The drain deadline plus the bounded closing (flush 10 s, closes 10 s each at most): a hang guard.
            #expect(stopTime < drain + .seconds(20), "stopped in \(stopTime)")
            let drainedInTime = !first.log.contains("drain deadline passed")
            print("sigterm under load: first relay stopped in \(stopTime), drained in time: \(drainedInTime)")
            #expect(drainedInTime, "the drain of at most \(maxInFlight) events ended within \(drain); log:\n\(first.log.suffix(3000))")

            let second = try RelayProcess(environment: env)
            let seenBefore = Set(collected.filter { $0.topic == results }.map(\.keyString))
            collected += try await reader.collect(timeout: .seconds(120)) { new in
                seenBefore.union(new.filter { $0.topic == results }.map(\.keyString)).count >= count
            }
            let secondStatus = await second.terminate(timeout: drain + .seconds(25))
            #expect(secondStatus == 0, "log:\n\(second.log.suffix(3000))")
            // Seeing every key ends the wait, not the count: both relays have stopped, so the results are read
            // on to their end offsets, and a duplicate written after the last new key is counted too.
            collected += try await reader.readToEnd(of: results, timeout: .seconds(60))
            await reader.close()
            #expect(reader.redeliveries == 0, "the reader's consumer delivered \(reader.redeliveries) records twice (librdkafka#4686 when a partition that is not paused is resumed)")
            let keys = collected.filter { $0.topic == results }.map(\.keyString)
            #expect(Set(keys).count == count, "every event has a result")
            let duplicates = keys.count - Set(keys).count
            #expect(duplicates == 0, "a clean stop commits everything it finished: \(duplicates) duplicates")
        }
    }

    /// With a few partitions and with as many as production topics for push traffic have (128): the
    /// rebalance when the second joins, and the first's drain when it leaves, hand every partition over.
    /// The leave redoes nothing of the leaving relay's partitions (bound 0, `GroupHandOver.expectNothingLost`);
    /// the join's duplicates are printed, not bounded: the mock refuses commits for the whole join phase of a
    /// rebalance, which Apache Kafka accepts (see `SecondBrokerTests.twoRelaysHandOverTheGroupOnASecondBrokerAndNothingIsLost`).
    @Test(arguments: [8, 128])
    func twoRelaysShareTheGroupAndNothingIsLostWhenOneJoinsAndTheOtherLeaves(partitions: Int) async throws {
        var options = RelaySandbox.Options()
        options.partitions = partitions
        try await withSandbox(options, logger: logger) { sandbox in
            let run = try await GroupHandOver.run(sandbox, logger: logger)
            run.expectNothingLost("two relays, \(partitions) partitions")
            #expect(run.logA.contains("partitions revoked"), "the first relay saw its partitions revoked when the second joined")
        }
    }

    @Test func adminEndpointServesMetricsAndProbesAndLogsCarryNoSecrets() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 200
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            let env = environment(sandbox, group: "admin-\(UUID().uuidString.prefix(8))", extra: [
                "APNS_RELAY_LOG_LEVEL": "trace", "APNS_RELAY_RELAY_DRAIN_TIMEOUT_MS": "4000",
                "APNS_RELAY_ADMIN_HOST": "127.0.0.1", "APNS_RELAY_ADMIN_PORT": String(try freeLocalPort()),
            ])
            let port = env["APNS_RELAY_ADMIN_PORT"]!
            let relay = try RelayProcess(environment: env)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            try await eventually("/healthz answers 200", within: .seconds(30)) { try await http("http://127.0.0.1:\(port)/healthz").status == 200 }
            try await eventually("/readyz answers 200 once the relay runs", within: .seconds(30)) { try await http("http://127.0.0.1:\(port)/readyz").status == 200 }
            try await sandbox.produce(events)
            _ = try await reader.results(count: count, timeout: .seconds(90))
            // A result is counted when the relay's producer gets its delivery report, which can come after a
            // consumer (the reader) already sees the record: wait for the count, don't assume it.
            let delivered = #"apns_relay_results_total{outcome="delivered",reason=""}"#
            try await eventually("the relay counted every delivered result", within: .seconds(30)) {
                metric(try await http("http://127.0.0.1:\(port)/metrics").body, delivered) == Double(count)
            }
            let metrics = try await http("http://127.0.0.1:\(port)/metrics").body
            #expect(metric(metrics, "apns_relay_events_consumed_total") == Double(count), "\(metrics.prefix(3000))")
            #expect(metric(metrics, delivered) == Double(count))
            #expect(metrics.contains("apns_relay_event_latency_seconds_bucket"), "latency histogram")
            #expect(metrics.contains("apns_relay_events_in_flight"))
            // The client's series carry the credential and the environment (bounded: configuration names).
            let requests = metrics.split(separator: "\n").filter { $0.hasPrefix("apns_client_requests_total{") }
            #expect(requests.contains { $0.contains(#"credential="default""#) && $0.contains(#"environment=""#) }, "\(requests)")
            var requestCount = 0.0
            for line in requests {
                if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { requestCount += value }
            }
            #expect(requestCount == Double(count), "\(requests)")

            // Hold APNs' answers so the stop has something to drain; /readyz must say so meanwhile.
            sandbox.apns.faults.withholdAllReplies = true
            try await sandbox.produce([(key: "held", value: SampleEvents.event(id: "held", deviceToken: SampleEvents.token(9999)))])
            try await eventually("the held event is in flight", within: .seconds(30)) {
                metric(try await http("http://127.0.0.1:\(port)/metrics").body, "apns_relay_events_in_flight") == 1
            }
            relay.process.terminate()
            try await eventually("/readyz answers 503 while draining", within: .seconds(10)) { try await http("http://127.0.0.1:\(port)/readyz").status == 503 }
            sandbox.apns.faults.withholdAllReplies = false
            // SIGTERM was sent above: wait for the drain to finish (a second SIGTERM would end it at once).
            let status = await relay.exit(within: .seconds(20))
            #expect(status == 0)
            await reader.close()

            let log = relay.log
            #expect(log.contains("\"message\":\"relay started\""), "JSON log lines")
            let key = try String(contentsOfFile: sandbox.keyFile, encoding: .utf8)
            let keyBody = key.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            #expect(!log.contains(keyBody.prefix(40)), "no key material in the logs")
            #expect(!log.contains("PRIVATE KEY"), "no PEM in the logs")
            #expect(!log.contains("eyJhbGciOi") && !log.contains("eyJraWQiOi"), "no JWT in the logs")
            #expect(!log.contains("bearer "), "no authorization header in the logs")
        }
    }
}

/// The value of the first sample line that starts with `series` (name plus labels, exactly).
func metric(_ text: String, _ series: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1).split(separator: " ").first ?? "")
    }
    return nil
}

/// GET with curl (an independent HTTP client), waited for off Swift's cooperative threads: read blocking
/// there, as it once was, several tests polling every 50 ms held both of a 2-core machine's pool threads, and
/// the rest of the parallel suite starved past its deadlines.
func http(_ url: String) async throws -> (status: Int, body: String) {
    let output = try await runProcess("/usr/bin/curl", ["-s", "-m", "5", "-w", "\n%{http_code}", url], timeout: .seconds(30)).stdout
    let status = Int(output.split(separator: "\n").last ?? "") ?? 0
    let body = output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().joined(separator: "\n")
    return (status, body)
}


