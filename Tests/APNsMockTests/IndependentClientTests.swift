import APNsCore
import APNsMock
import Foundation
import TestSupport
import Testing

/// The mock against Debian's HTTP/2 clients (curl with nghttp2, nghttp, h2load) over TLS with ALPN h2.
@Suite struct IndependentClientTests {
    /// curl with `--http2` (ALPN h2), trusting the CA file; returns status line headers and body.
    func curl(_ fixture: MockFixture, path: String = "/3/device/\(deviceToken)", headers: [(String, String)], body: String?) async throws
        -> (status: Int?, headers: [String: String], body: String)
    {
        try await curl(fixture, TestRequest(path: path, headers: headers, body: body.map { Array($0.utf8) } ?? []))
    }

    /// Sends `request` with curl `--http2` to the push port, or to `port`; returns status, headers and body.
    func curl(_ fixture: MockFixture, _ request: TestRequest, port: Int? = nil, arguments extra: [String] = []) async throws
        -> (status: Int?, headers: [String: String], body: String)
    {
        var arguments = ["-sS", "--http2", "--cacert", fixture.caPath, "-D", "-", "--max-time", "10", "-X", request.method] + extra
        for (name, value) in request.headers { arguments += ["-H", "\(name): \(value)"] }
        if !request.body.isEmpty { arguments += ["--data-binary", String(decoding: request.body, as: UTF8.self)] }
        arguments.append("https://localhost:\(port ?? fixture.port)\(request.path)")
        let result = try await runProcess("/usr/bin/curl", arguments)
        #expect(result.status == 0, "curl failed: \(result.stderr)")
        var status: Int?
        var parsed: [String: String] = [:]
        var lines = result.stdout.components(separatedBy: "\r\n")[...]
        while let line = lines.first, !line.isEmpty {
            lines = lines.dropFirst()
            if line.hasPrefix("HTTP/2 ") {
                status = Int(line.dropFirst(7).prefix(3))
            } else if let colon = line.firstIndex(of: ":") {
                parsed[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return (status, parsed, lines.dropFirst().joined(separator: "\r\n"))
    }

    func headers(_ fixture: MockFixture, _ overrides: [(String, String?)] = []) -> [(String, String)] {
        fixture.request(overrides).headers
    }

    @Test func curlOverTLSWithALPNh2GetsEveryAnswer() async throws {
        let fixture = try await MockFixture.start { $0.environment = .development }
        fixture.server.registry.unregister(deviceToken, sinceMilliseconds: 1_650_000_000_000)
        let other = "12" + deviceToken
        let ok = try await curl(fixture, path: "/3/device/\(other)", headers: headers(fixture, [("apns-id", "7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11")]),
                                body: #"{"aps":{"alert":"curl"}}"#)
        #expect(ok.status == 200)
        #expect(ok.headers["apns-id"] == "7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11")
        #expect(APNsNotification.isCanonicalUUID(ok.headers["apns-unique-id"] ?? ""))
        let gone = try await curl(fixture, headers: headers(fixture), body: #"{"aps":{}}"#)
        #expect(gone.status == 410)
        #expect(gone.body == #"{"reason":"Unregistered","timestamp":1650000000000}"#)
        let badTopic = try await curl(fixture, path: "/3/device/\(other)", headers: headers(fixture, [("apns-push-type", "voip")]), body: "{}")
        #expect(badTopic.status == 400 && badTopic.body == #"{"reason":"BadTopic"}"#)
        let noAuth = try await curl(fixture, path: "/3/device/\(other)", headers: headers(fixture, [("authorization", nil)]), body: "{}")
        #expect(noAuth.status == 403 && noAuth.body == #"{"reason":"MissingProviderToken"}"#)
        let badPath = try await curl(fixture, path: "/3/other", headers: headers(fixture), body: "{}")
        #expect(badPath.status == 404 && badPath.body == #"{"reason":"BadPath"}"#)
        let accepted = try await fixture.server.waitForAccepted(count: 1, timeout: .seconds(5))
        #expect(accepted.map(\.payload) == [Array(#"{"aps":{"alert":"curl"}}"#.utf8)])
        await fixture.stop()
    }

    /// The whole reason table of `ValidationTests`, sent by curl instead of the in-process client.
    @Test(arguments: ValidationTests.cases)
    func curlGetsEveryReason(_ testCase: ValidationTests.Case) async throws {
        let fixture = try await MockFixture.start()
        ValidationTests.registerSpecialTokens(fixture)
        let documented = try DocumentedReason.row(for: testCase.reason)
        let response = try await curl(fixture, testCase.make(fixture))
        #expect(response.status == documented.status, "curl: \(response)")
        #expect(APNsNotification.isCanonicalUUID(response.headers["apns-id"] ?? ""))
        if documented.status == 410 {
            #expect(response.body.hasPrefix(#"{"reason":"\#(documented.reason)","timestamp":"#))
        } else {
            #expect(response.body == #"{"reason":"\#(documented.reason)"}"#)
        }
        #expect(fixture.server.statistics.count(documented) == 1, "the mock did not count \(documented)")
        await fixture.stop()
    }

    @Test func curlSendsBroadcasts() async throws {
        let setup = try await BroadcastSetup.start()
        let fixture = setup.fixture
        let id = "2d3c4b5a-6978-4695-a4b3-c2d1e0f9a8b7"
        let ok = try await curl(fixture, setup.send([("apns-request-id", id), ("apns-push-type", "LiveActivity")]))
        #expect(ok.status == 200 && ok.body.isEmpty)
        #expect(ok.headers["apns-request-id"] == id)
        #expect(APNsNotification.isCanonicalUUID(ok.headers["apns-unique-id"] ?? ""))
        #expect(ok.headers["apns-id"] == nil)
        let generated = try await curl(fixture, fixture.broadcast(channelID: setup.noStorage, [("apns-expiration", "0")]))
        #expect(generated.status == 200 && APNsNotification.isCanonicalUUID(generated.headers["apns-request-id"] ?? ""))
        let accepted = try await fixture.server.waitForAcceptedBroadcasts(count: 2, timeout: .seconds(5))
        #expect(accepted.map(\.channelID) == [setup.storing, setup.noStorage])
        #expect(accepted.first?.payload == Array(liveActivityUpdate.utf8))
        await fixture.stop()
    }

    /// The whole broadcast reason table of `BroadcastTests`, sent by curl.
    @Test(arguments: BroadcastTests.cases)
    func curlGetsEveryBroadcastReason(_ testCase: BroadcastTests.Case) async throws {
        let setup = try await BroadcastSetup.start()
        let documented = try DocumentedReason.row(for: testCase.reason)
        let response = try await curl(setup.fixture, testCase.make(setup))
        #expect(response.status == documented.status, "curl: \(response)")
        #expect(response.body == #"{"reason":"\#(documented.reason)"}"#)
        #expect(APNsNotification.isCanonicalUUID(response.headers["apns-request-id"] ?? ""))
        #expect(response.headers["apns-id"] == nil)
        #expect(setup.fixture.server.statistics.count(documented) == 1, "the mock did not count \(documented)")
        await setup.fixture.stop()
    }

    @Test func curlManagesChannels() async throws {
        let fixture = try await ChannelManagementTests.start()
        let port = try #require(fixture.server.managementPort)
        let id = "6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d"
        let created = try await curl(fixture, fixture.createChannel().withHeader("apns-request-id", id), port: port)
        #expect(created.status == 201 && created.body.isEmpty)
        #expect(created.headers["apns-request-id"] == id)
        let channelID = try #require(created.headers["apns-channel-id"], "201 without apns-channel-id: \(created)")
        #expect(fixture.server.channels.storagePolicy(bundleID: bundleID, channelID: channelID) == 0)

        let read = try await curl(fixture, fixture.channelRequest("GET", channelID: channelID), port: port)
        #expect(read.status == 200 && read.headers["content-type"] == "application/json")
        #expect(read.body == #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
        #expect(APNsNotification.isCanonicalUUID(read.headers["apns-request-id"] ?? ""))

        let list = try await curl(fixture, fixture.channelRequest("GET", all: true), port: port)
        #expect(list.status == 200 && list.body == #"{"channels":["\#(channelID)"]}"#)

        let deleted = try await curl(fixture, fixture.channelRequest("DELETE", channelID: channelID), port: port)
        #expect(deleted.status == 204 && deleted.body.isEmpty)
        #expect(APNsNotification.isCanonicalUUID(deleted.headers["apns-request-id"] ?? ""))
        let gone = try await curl(fixture, fixture.channelRequest("GET", channelID: channelID), port: port)
        #expect(gone.status == 400 && gone.body == #"{"reason":"ChannelNotRegistered"}"#)
        let wrongMethod = try await curl(fixture, fixture.channelRequest("PATCH", all: true), port: port)
        #expect(wrongMethod.status == 405 && wrongMethod.body == #"{"reason":"MethodNotAllowed"}"#)
        let devicePath = try await curl(fixture, fixture.request(), port: port)
        #expect(devicePath.status == 404 && devicePath.body == #"{"reason":"BadPath"}"#)
        #expect(fixture.server.statistics.managementRequests == 7)
        await fixture.stop()
    }

    /// The channel-management reason table of `ChannelManagementTests`, sent by curl.
    @Test(arguments: ChannelManagementTests.cases)
    func curlGetsEveryChannelManagementReason(_ testCase: ChannelManagementTests.Case) async throws {
        let fixture = try await ChannelManagementTests.start()
        let port: Int = try #require(fixture.server.managementPort)
        let response = try await curl(fixture, testCase.make(fixture), port: port)
        #expect(response.status == testCase.status, "curl: \(response)")
        #expect(response.body == #"{"reason":"\#(testCase.reason)"}"#)
        #expect(APNsNotification.isCanonicalUUID(response.headers["apns-request-id"] ?? ""))
        await fixture.stop()
    }

    /// About 80 KB of channel ids: curl must receive DATA across several frames and window updates.
    @Test func curlReadsALargeChannelList() async throws {
        let fixture = try await ChannelManagementTests.start()
        for _ in 0..<3_000 { try fixture.server.channels.create(bundleID: bundleID, storagePolicy: 1) }
        let port: Int = try #require(fixture.server.managementPort)
        let list = try await curl(fixture, fixture.channelRequest("GET", all: true), port: port)
        #expect(list.status == 200)
        let ids = jsonObject(list.body)?["channels"] as? [String]
        #expect(ids == fixture.server.channels.channels(bundleID: bundleID), "\(list.body.utf8.count) bytes")
        await fixture.stop()
    }

    @Test func nghttpSendsABroadcastAndCreatesAChannel() async throws {
        let setup = try await BroadcastSetup.start { $0.managementPort = 0 }
        let fixture = setup.fixture
        let payload = fixture.directory.appendingPathComponent("broadcast.json")
        try Data(liveActivityUpdate.utf8).write(to: payload)
        let create = fixture.directory.appendingPathComponent("create.json")
        try Data(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8).write(to: create)
        func nghttp(_ request: TestRequest, port: Int, data: URL) async throws -> String {
            var arguments = ["-nv", "-d", data.path]
            for (name, value) in request.headers { arguments += ["-H", "\(name): \(value)"] }
            arguments.append("https://127.0.0.1:\(port)\(request.path)")
            let result = try await runProcess("/usr/bin/nghttp", arguments)
            #expect(result.status == 0, "nghttp failed: \(result.stderr)")
            return result.stdout
        }
        let sent = try await nghttp(setup.send(), port: fixture.port, data: payload)
        #expect(sent.contains(":status: 200"), "nghttp output: \(sent)")
        #expect(sent.contains("apns-request-id: ") && sent.contains("apns-unique-id: "))
        let created = try await nghttp(fixture.channelRequest("POST"), port: try #require(fixture.server.managementPort), data: create)
        #expect(created.contains(":status: 201") && created.contains("apns-channel-id: "), "nghttp output: \(created)")
        #expect(fixture.server.channels.channels(bundleID: bundleID).count == 3)  // two of BroadcastSetup, one new
        #expect(try await fixture.server.waitForAcceptedBroadcasts(count: 1, timeout: .seconds(5)).count == 1)
        await fixture.stop()
    }

    @Test func nghttpSeesOneStreamLimitThenTheRaisedLimit() async throws {
        let fixture = try await MockFixture.start()
        let payload = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-nghttp-\(UUID()).json")
        try Data(#"{"aps":{"alert":"nghttp"}}"#.utf8).write(to: payload)
        defer { try? FileManager.default.removeItem(at: payload) }
        var arguments = ["-nv", "-d", payload.path]
        for (name, value) in headers(fixture) { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("https://127.0.0.1:\(fixture.port)/3/device/\(deviceToken)")
        let result = try await runProcess("/usr/bin/nghttp", arguments)
        #expect(result.status == 0, "nghttp failed: \(result.stderr)")
        // Settings lines follow their frame's "recv SETTINGS" / "send SETTINGS" line.
        var receiving = false
        var settings: [String] = []
        for line in result.stdout.components(separatedBy: "\n") {
            if line.contains("] recv ") { receiving = true } else if line.contains("] send ") { receiving = false }
            if receiving, line.contains("SETTINGS_MAX_CONCURRENT_STREAMS") { settings.append(line) }
        }
        #expect(settings.count == 2, "nghttp output: \(result.stdout)")
        #expect(settings.first?.contains("):1") == true)
        #expect(settings.last?.contains("):1000") == true)
        #expect(result.stdout.contains(":status: 200"))
        #expect(result.stdout.contains("h2"), "ALPN h2 not negotiated")
        try await fixture.server.waitForAccepted(count: 1, timeout: .seconds(5))
        await fixture.stop()
    }

    @Test func h2loadBurstIsAcceptedExactlyOnce() async throws {
        let fixture = try await MockFixture.start()
        let payload = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-h2load-\(UUID()).json")
        try Data(String(repeating: "x", count: 300).utf8).write(to: payload)
        defer { try? FileManager.default.removeItem(at: payload) }
        var arguments = ["-n", "2000", "-c", "4", "-m", "50", "-d", payload.path]
        for (name, value) in headers(fixture) { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("https://127.0.0.1:\(fixture.port)/3/device/\(deviceToken)")
        let result = try await runProcess("/usr/bin/h2load", arguments, timeout: .seconds(60))
        #expect(result.status == 0, "h2load failed: \(result.stderr)")
        #expect(result.stdout.contains("2000 succeeded"), "h2load output: \(result.stdout)")
        #expect(result.stdout.contains("status codes: 2000 2xx"), "h2load output: \(result.stdout)")
        #expect(result.stdout.contains("h2"))
        try await fixture.server.waitForAccepted(count: 2000, timeout: .seconds(10))
        #expect(fixture.server.statistics.acceptedByDeviceToken[deviceToken] == 2000)
        await fixture.stop()
    }

    @Test func controlPortProgramsFaultsAndReportsCounters() async throws {
        let fixture = try await MockFixture.start { $0.controlPort = 0 }
        let control = try #require(fixture.server.controlPort)
        let set = try await runProcess("/usr/bin/curl", [
            "-sS", "--max-time", "10", "-X", "POST", "--data-binary", #"{"failNext":{"count":1,"reason":"ServiceUnavailable"}}"#,
            "http://127.0.0.1:\(control)/faults",
        ])
        #expect(set.status == 0 && set.stdout == "{}", "control: \(set.stdout) \(set.stderr)")
        let first = try await curl(fixture, headers: headers(fixture), body: "{}")
        #expect(first.status == 503 && first.body == #"{"reason":"ServiceUnavailable"}"#)
        let second = try await curl(fixture, headers: headers(fixture), body: "{}")
        #expect(second.status == 200)
        let stats = try await runProcess("/usr/bin/curl", ["-sS", "--max-time", "10", "http://127.0.0.1:\(control)/stats"])
        let object = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]
        #expect(object?["accepted"] as? Int == 1)
        #expect((object?["responses"] as? [String: Int])?["503 ServiceUnavailable"] == 1)
        await fixture.stop()
    }

    @Test func controlPortReportsAcceptedBroadcasts() async throws {
        let setup = try await BroadcastSetup.start { $0.controlPort = 0 }
        let control = try #require(setup.fixture.server.controlPort)
        let sent = try await curl(setup.fixture, setup.send([("apns-expiration", "1700003600")]))
        #expect(sent.status == 200)
        let listed = try await runProcess("/usr/bin/curl", ["-sS", "--max-time", "10", "http://127.0.0.1:\(control)/accepted-broadcasts"])
        let entries = jsonObject(listed.stdout)?["accepted"] as? [[String: Any]]
        #expect(entries?.count == 1, "control: \(listed.stdout)")
        #expect(entries?.first?["channelId"] as? String == setup.storing)
        #expect(entries?.first?["bundleId"] as? String == bundleID)
        #expect(entries?.first?["requestId"] as? String == sent.headers["apns-request-id"])
        #expect(entries?.first?["uniqueId"] as? String == sent.headers["apns-unique-id"])
        #expect(entries?.first?["expiration"] as? Int == 1_700_003_600)
        #expect(entries?.first?["payload"] as? String == liveActivityUpdate)
        let stats = try await runProcess("/usr/bin/curl", ["-sS", "--max-time", "10", "http://127.0.0.1:\(control)/stats"])
        let object = jsonObject(stats.stdout)
        #expect(object?["acceptedBroadcasts"] as? Int == 1 && object?["broadcastRequests"] as? Int == 1)
        #expect(object?["accepted"] as? Int == 0 && object?["managementRequests"] as? Int == 0)
        await setup.fixture.stop()
    }
}
