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
        var arguments = ["-sS", "--http2", "--cacert", fixture.caPath, "-D", "-", "--max-time", "10"]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        if let body { arguments += ["--data-binary", body] }
        arguments.append("https://localhost:\(fixture.port)\(path)")
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
        let request = testCase.make(fixture)
        var arguments = ["-sS", "--http2", "--cacert", fixture.caPath, "-D", "-", "--max-time", "10", "-X", request.method]
        for (name, value) in request.headers { arguments += ["-H", "\(name): \(value)"] }
        if !request.body.isEmpty { arguments += ["--data-binary", String(decoding: request.body, as: UTF8.self)] }
        arguments.append("https://localhost:\(fixture.port)\(request.path)")
        let result = try await runProcess("/usr/bin/curl", arguments)
        #expect(result.status == 0, "curl failed: \(result.stderr)")
        let lines = result.stdout.components(separatedBy: "\r\n")
        #expect(lines.first == "HTTP/2 \(testCase.reason.status ?? 0) ", "curl output: \(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("apns-id: ") && APNsNotification.isCanonicalUUID(String($0.dropFirst(9))) })
        let body = lines.last ?? ""
        if testCase.reason.status == 410 {
            #expect(body.hasPrefix(#"{"reason":"\#(testCase.reason.rawValue)","timestamp":"#))
        } else {
            #expect(body == #"{"reason":"\#(testCase.reason.rawValue)"}"#)
        }
        #expect(fixture.server.statistics.count(testCase.reason) == 1, "the mock did not count \(testCase.reason)")
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
}
