import APNsCore
import Foundation
import Kafka
import Logging
import Relay
import RelaySandbox
import TestSupport
import Testing
import APNsMock

/// Events into the mock Kafka cluster, the relay in between, results read back from Kafka — with the mock
/// APNs (TLS + HTTP/2) on the other side. These are the tests a user would write.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct EndToEndTests {
    let logger = Logger.quiet("e2e")

    @Test func validEventsAreDeliveredExactlyOnceEach() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 300
            let events = (0..<count).map { n in
                (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n), metadata: #"{"n":\#(n)}"#))
            }
            try await sandbox.produce(events)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = try await withRelay(sandbox, logger: logger) { _ in
                try await reader.results(count: count, timeout: .seconds(90))
            }
            // The relay has stopped: whatever it wrote is in the topic. Read to its end, so that a duplicate
            // written after the 300th result is seen too.
            let resultsTopic = sandbox.options.topics.results
            let later = try await reader.readToEnd(of: resultsTopic, timeout: .seconds(30)).filter { $0.topic == resultsTopic }
            await reader.close()
            #expect(later.isEmpty, "no result after the first \(count): \(later.map(\.keyString).prefix(10))")
            #expect(results.count == count, "exactly one result per event")
            #expect(Set(results.map(\.keyString)) == Set(events.map(\.key)))
            for result in results {
                let json = try #require(result.json)
                #expect(json["outcome"] as? String == "delivered", "\(json)")
                #expect(json["status"] as? Int == 200)
                #expect(json["apnsUniqueId"] as? String != nil, "the development mock sends apns-unique-id")
                let metadata = try #require(json["metadata"] as? [String: Any])
                #expect("k\(metadata["n"] as? Int ?? -1)" == result.keyString, "metadata echoed with its event")
            }
            let statistics = sandbox.apns.statistics
            #expect(statistics.accepted == count)
            #expect(statistics.acceptedByDeviceToken.values.allSatisfy { $0 == 1 }, "APNs accepted each notification once")
            do { let problems = try await validateWithPython(results.map(\.value), schema: "delivery-result.schema.json"); #expect(problems.isEmpty, "\(problems)") }
        }
    }

    @Test func malformedInputGetsAnInvalidResultAndADeadLetterAndThePartitionMovesOn() async throws {
        var options = RelaySandbox.Options()
        options.partitions = 1  // one partition: every bad event sits in front of the good one
        try await withSandbox(options, logger: logger) { sandbox in
            let token = SampleEvents.token(1)
            var deep = ""
            for _ in 0..<200 { deep += #"{"a":"# }
            deep += "1" + String(repeating: "}", count: 200)
            let malformed: [(key: String, value: [UInt8], reason: String)] = [
                ("not-json", Array("hello, kafka".utf8), "invalid_json"),
                ("wrong-type", Array(#"{"id":"w","deviceToken":"\#(token)","topic":"com.example.app","pushType":"alert","priority":"high","environment":"development","payload":{"aps":{}}}"#.utf8), "schema_violation"),
                ("missing-fields", Array(#"{"id":"m","topic":"com.example.app"}"#.utf8), "schema_violation"),
                ("bad-token", SampleEvents.event(id: "b", deviceToken: "abc"), "schema_violation"),
                ("deep-nesting", SampleEvents.event(id: "d", deviceToken: token, payload: deep), "too_deep"),
                ("invalid-utf8", Array(#"{"id":"u"#.utf8) + [0xC3, 0x28] + Array(#"","deviceToken":"\#(token)"}"#.utf8), "invalid_utf8"),
                ("empty", [], "empty_event"),
                ("collapse-id-too-long", SampleEvents.event(id: "c", deviceToken: token, collapseID: String(repeating: "é", count: 40)), "BadCollapseId"),
            ]
            let good = (key: "good", value: SampleEvents.event(id: "g", deviceToken: token))
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let records = try await withRelay(sandbox, logger: logger) { _ in
                // Produced while the relay runs: the mock broker keeps only ~5 MB per partition, so the
                // 10 MB event would push older events out of a backlog.
                try await sandbox.produce(malformed.map { (key: $0.key, value: $0.value) } + [good])
                return try await reader.collect(timeout: .seconds(90)) { records in
                    records.filter { $0.topic == topics.results }.count >= malformed.count + 1
                        && records.filter { $0.topic == topics.deadLetters }.count >= malformed.count
                }
            }
            await reader.close()
            let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0) }) { a, _ in a }
            let letters = Dictionary(records.filter { $0.topic == topics.deadLetters }.map { ($0.keyString, $0) }) { a, _ in a }
            for bad in malformed {
                let result = try #require(results[bad.key]?.json, "no result for \(bad.key)")
                #expect(result["outcome"] as? String == "invalid", "\(bad.key): \(result)")
                #expect(result["reason"] as? String == bad.reason, "\(bad.key): \(result)")
                let letter = try #require(letters[bad.key], "no dead letter for \(bad.key)")
                #expect(letter.header("__connect.errors.topic") == topics.input[0])
                #expect(letter.header("__connect.errors.exception.class.name") == bad.reason)
                if bad.value.count <= 900 * 1024 {
                    #expect(letter.value == bad.value, "\(bad.key): the dead letter carries the original bytes")
                } else {
                    #expect(letter.header("apns-relay.truncated") == "true")
                    #expect(letter.header("apns-relay.original.size") == String(bad.value.count))
                }
            }
            #expect(results["good"]?.json?["outcome"] as? String == "delivered", "the partition kept flowing")
            // Explained by the reference validator (off the consumer loop): every problem, not just the first.
            let explained = results["missing-fields"]?.json?["message"] as? String ?? ""
            for property in ["deviceToken", "payload", "pushType"] {
                #expect(explained.contains("required member \"\(property)\" is missing"), "\(explained)")
            }
            do { let problems = try await validateWithPython(records.filter { $0.topic == topics.results }.map(\.value), schema: "delivery-result.schema.json"); #expect(problems.isEmpty, "\(problems)") }
        }
    }

    @Test func goneTokensYieldUnregisteredResultsAndRemovedTokenRecords() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let gone = SampleEvents.token(7)
            let since: Int64 = 1_700_000_000_123
            sandbox.apns.registry.unregister(gone, sinceMilliseconds: since)
            let otherEnvironment = SampleEvents.token(8)
            sandbox.apns.registry.register(otherEnvironment, environment: .production)
            // Good pushes first: a BadDeviceToken removal is published only once the window shows BadDeviceToken
            // is a plausible share of the answers (TokenRemovalGuard); alone it would be 1 of 1 or 1 of 2.
            try await sandbox.produce((0..<4).map { (key: "fine\($0)", value: SampleEvents.event(id: "fine\($0)", deviceToken: SampleEvents.token(100 + $0))) })
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let records = try await withRelay(sandbox, logger: logger) { _ in
                _ = try await reader.results(count: 4, timeout: .seconds(60))
                try await sandbox.produce([
                    (key: "gone", value: SampleEvents.event(id: "gone", deviceToken: gone, metadata: #"{"user":7}"#)),
                    (key: "other-env", value: SampleEvents.event(id: "other-env", deviceToken: otherEnvironment)),
                ])
                return try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 2 && records.filter { $0.topic == topics.removedTokens }.count >= 2
                }
            }
            await reader.close()
            let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            #expect(results["gone"]?["outcome"] as? String == "unregistered")
            #expect(results["gone"]?["status"] as? Int == 410)
            #expect(results["other-env"]?["outcome"] as? String == "rejected")
            #expect(results["other-env"]?["reason"] as? String == "BadDeviceToken")
            let removed = Dictionary(records.filter { $0.topic == topics.removedTokens }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            let goneRecord = try #require(removed[gone], "removed-token record keyed by the device token")
            #expect(goneRecord["invalidatedAt"] as? Int64 == since, "APNs' 410 timestamp, in milliseconds")
            #expect(goneRecord["reason"] as? String == "Unregistered")
            #expect(goneRecord["id"] as? String == "gone")
            #expect(removed[otherEnvironment]?["reason"] as? String == "BadDeviceToken")
            do { let problems = try await validateWithPython(records.filter { $0.topic == topics.removedTokens }.map(\.value), schema: "token-removed.schema.json"); #expect(problems.isEmpty, "\(problems)") }
        }
    }

    @Test func serviceUnavailableStormIsRetriedUntilDeliveredAndExpirationIsRespected() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 100
            sandbox.apns.faults.failNext(150, with: .serviceUnavailable)
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            try await sandbox.produce(events)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let shortLivedToken = SampleEvents.token(999)
            let (results, shortLived, expiration) = try await withRelay(
                sandbox, overrides: ["relay.retry.initialBackoffMs": "300", "relay.retry.maxBackoffMs": "2000", "relay.retry.maxAttempts": "20"],
                logger: logger
            ) { _ in
                let results = try await reader.results(count: count, timeout: .seconds(120))
                // The storm is over (every event was delivered after it) and the relay is connected: now one
                // device whose pushes APNs keeps refusing with 503. Its event is sent at once, retried until a
                // retry would be due within a second of its apns-expiration, and must then end `expired` with
                // no attempt after the expiration.
                sandbox.apns.registry.set(shortLivedToken, .failing(.serviceUnavailable))
                let expiration = Int64(Date().timeIntervalSince1970) + 4
                try await sandbox.produce([(key: "short-lived", value: SampleEvents.event(id: "s", deviceToken: shortLivedToken, expiration: expiration))])
                let shortLived = try await reader.results(count: 1, timeout: .seconds(60))
                return (results, shortLived, expiration)
            }
            await reader.close()
            let byKey = Dictionary(results.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            for n in 0..<count {
                #expect(byKey["k\(n)"]?["outcome"] as? String == "delivered", "k\(n): \(byKey["k\(n)"] ?? [:])")
            }
            let retried = byKey.values.filter { ($0["attempts"] as? Int ?? 0) > 1 }.count
            #expect(retried > 0, "attempts are recorded")

            #expect(shortLived.map(\.keyString) == ["short-lived"])
            let result = try #require(shortLived.first?.json)
            #expect(result["outcome"] as? String == "expired", "\(result)")
            let seen = try #require(sandbox.apns.statistics.deviceTokens[shortLivedToken], "the short-lived event was sent before it expired")
            #expect(seen.accepted == 0)
            #expect(sandbox.apns.statistics.count(.serviceUnavailable) == 150 + seen.requests, "the storm's 150 answers, plus the failing device's")
            // Retried (20 attempts would outlast four seconds of backoff; expiry must stop it first) ...
            #expect(seen.requests >= 2, "the short-lived event was retried before it expired: \(seen.requests) requests")
            #expect(result["attempts"] as? Int == seen.requests, "the result counts every attempt APNs saw")
            // ... and never sent at or after its apns-expiration (the mock's clock is this machine's).
            #expect(seen.lastRequestMilliseconds < expiration * 1000,
                    "last attempt \(seen.lastRequestMilliseconds - expiration * 1000) ms after apns-expiration \(expiration)")
        }
    }
}

extension EndToEndTests {
    // Over the relay's 64 KiB event limit, and (2 MiB) over Kafka's default 1 MB record size. A 10 MiB record is
    // not tested: on librdkafka 2.0.2's mock cluster a *group* consumer never receives it (nor the record after
    // it) — kcat -G skips both the same way, even with fetch.message.max.bytes=20000000, while kcat's simple
    // consumer reads it. A real broker needs message.max.bytes ≥ 10 MB to hold such a record at all.
    @Test(arguments: [100 << 10, 2 << 20])
    func oversizeMessageIsRefusedUnparsedAndDeadLettered(size: Int) async throws {
        var options = RelaySandbox.Options()
        options.partitions = 1
        try await withSandbox(options, logger: logger) { sandbox in
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let huge = Array(repeating: UInt8(ascii: "x"), count: size)
            let records = try await withRelay(sandbox, logger: logger) { _ in
                try await sandbox.produce([(key: "huge", value: huge), (key: "after", value: SampleEvents.event(id: "a", deviceToken: SampleEvents.token(3)))])
                return try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 2 && records.contains { $0.topic == topics.deadLetters }
                }
            }
            await reader.close()
            let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            #expect(results["huge"]?["outcome"] as? String == "invalid")
            #expect(results["huge"]?["reason"] as? String == "event_too_large")
            #expect(results["after"]?["outcome"] as? String == "delivered")
            let letter = try #require(records.first { $0.topic == topics.deadLetters })
            if size > 900 << 10 {
                #expect(letter.header("apns-relay.truncated") == "true")
                #expect(letter.header("apns-relay.original.size") == String(size))
                #expect(letter.value == Array(huge.prefix(letter.value.count)), "the dead letter starts with the original bytes")
            } else {
                #expect(letter.value == huge, "the dead letter carries the original bytes")
            }
        }
    }
}

extension EndToEndTests {
    /// APNs unreachable is not a readiness failure: during an Apple outage every replica would turn unready at
    /// once (stalling rollouts and node drains) while nothing Kubernetes can do helps. It shows in the results
    /// and in `apns_relay_apns_connect_failure_streak`.
    @Test func unreachableAPNsFailsEventsAfterBoundedRetriesAndStaysReady() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let refusing = try RefusingPort()
            defer { withExtendedLifetime(refusing) {} }
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let overrides = [
                "apns.development.port": String(refusing.port), "relay.retry.maxAttempts": "2", "relay.retry.initialBackoffMs": "10",
            ]
            let (result, readiness) = try await withRelay(sandbox, overrides: overrides, logger: logger) { app in
                try await sandbox.produce([(key: "lost-at-sea", value: SampleEvents.event(id: "l", deviceToken: SampleEvents.token(5)))])
                let results = try await reader.results(count: 1, timeout: .seconds(60))
                return (results[0].json ?? [:], app.relay.readiness)
            }
            await reader.close()
            #expect(result["outcome"] as? String == "failed", "\(result)")
            #expect(result["attempts"] as? Int == 2)
            #expect(result["reason"] as? String == "connectFailed", "\(result)")
            // The transport's cause, not just its category: which address refused.
            let message = result["message"] as? String ?? ""
            #expect(message.contains("cannot connect to 127.0.0.1:\(refusing.port)") && message.contains("refused"), "\(result)")
            #expect(readiness == nil, "\(readiness ?? "ready")")
        }
    }

    /// An APNs address that takes the TCP connection and then says nothing (a firewall or a dead proxy on the
    /// way): the TLS handshake hangs until the connect timeout. A request whose deadline passes first is an
    /// attempt that failed to connect, and its result says so. (It used to end `notSent`, not counted as an
    /// attempt, and wait again: the event's result came only at the connect timeout, 5 s here.)
    @Test func aConnectStillHangingAtTheDeadlineIsNamedInTheResult() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let silent = try SilentListener()
            defer { withExtendedLifetime(silent) {} }
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let overrides = [
                "apns.development.port": String(silent.port), "apns.connectTimeoutMs": "5000",
                "relay.requestTimeoutMs": "300", "relay.retry.maxAttempts": "1",
            ]
            let result = try await withRelay(sandbox, overrides: overrides, logger: logger) { _ in
                try await sandbox.produce([(key: "hanging", value: SampleEvents.event(id: "h", deviceToken: SampleEvents.token(6)))])
                return try await reader.results(count: 1, timeout: .seconds(60))[0].json ?? [:]
            }
            await reader.close()
            #expect(result["outcome"] as? String == "failed", "\(result)")
            #expect(result["reason"] as? String == "connectFailed", "\(result)")
            #expect((result["message"] as? String ?? "").contains("still under way"), "\(result)")
        }
    }
}

extension EndToEndTests {
    @Test func eventsNoCredentialCoversAreRefusedNotSent() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            try await sandbox.produce([
                (key: "ours", value: SampleEvents.event(id: "ours", deviceToken: SampleEvents.token(1), topic: "com.example.app", pushType: .voip, priority: 10)),
                (key: "theirs", value: SampleEvents.event(id: "theirs", deviceToken: SampleEvents.token(2), topic: "com.other.app")),
            ])
            let topics = sandbox.options.topics
            let records = try await withRelay(sandbox, overrides: ["apns.topics": "com.example.app"], logger: logger) { _ in
                try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 2 && records.contains { $0.topic == topics.deadLetters }
                }
            }
            await reader.close()
            let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            #expect(results["ours"]?["outcome"] as? String == "delivered", "com.example.app.voip is covered by com.example.app")
            #expect(results["theirs"]?["outcome"] as? String == "invalid")
            #expect(results["theirs"]?["reason"] as? String == "NoCredentialForTopic")
            #expect(sandbox.apns.statistics.requests == 1, "the uncovered event never reached APNs")
        }
    }
}

extension EndToEndTests {
    /// A background event that leaves `priority` out is delivered with priority 5, which APNs (and the mock,
    /// faithful to it) requires; APNs' default of 10 would be refused with BadPriority.
    @Test func aBackgroundEventWithoutPriorityIsDeliveredWithPriorityFive() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            try await sandbox.produce([(key: "quiet", value: SampleEvents.event(
                id: "quiet", deviceToken: SampleEvents.token(6), pushType: .background, payload: #"{"aps":{"content-available":1}}"#))])
            let results = try await withRelay(sandbox, logger: logger) { _ in try await reader.results(count: 1, timeout: .seconds(60)) }
            await reader.close()
            #expect(results.first?.json?["outcome"] as? String == "delivered", "\(results.first?.json ?? [:])")
            #expect(sandbox.apns.acceptedNotifications.first?.priority == 5)
        }
    }
}
