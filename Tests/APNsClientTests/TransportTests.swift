import APNsCore
import CNGHTTP2
import Foundation
import Glibc
import Logging
import ServiceSupport
import TestSupport
import Testing
@testable import APNsClient

/// Transport against Debian's nghttpd (nghttp2's own server): real TLS, ALPN h2, HTTP/2.
@Suite(.serialized) struct TransportTests {
    static func notification(_ i: Int = 0, payload: [UInt8] = Array(#"{"aps":{"alert":"hi"}}"#.utf8)) throws -> APNsNotification {
        APNsNotification(
            deviceToken: try DeviceToken(hex: String(format: "%064x", i)), topic: "com.example.app", pushType: .alert,
            priority: .immediate, apnsID: "123e4567-e89b-12d3-a456-426614174000", payload: payload[...]
        )
    }

    static func client(port: Int, trust: ServerTrust, connectTimeout: Duration = .seconds(30), maxConnections: Int = 2) throws -> APNsClient {
        let signer = try ProviderTokenSigner(key: ECPrivateKey(rawPrivateKey: ProviderTokenTests.rfcKey), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        var configuration = APNsClientConfiguration(credential: .token(signer), trust: trust)
        configuration.route(allEnvironmentsTo: .init(host: "127.0.0.1", port: port))
        configuration.connection.connectTimeout = connectTimeout
        configuration.pool.maxConnections = maxConnections
        configuration.pool.reconnectBackoffBase = .milliseconds(10)
        var logger = Logger(label: "apns-client")
        logger.logLevel = .critical
        return try APNsClient(configuration: configuration, eventLoops: .forTests, logger: logger)
    }

    @Test func sendsOverTLSWithALPNh2AndReadsTheResponse() async throws {
        let server = try await NGHTTPD()
        defer { server.stop() }
        let client = try Self.client(port: server.port, trust: .caFile(server.caFile))
        let response = try await client.send(try Self.notification(), timeout: hangGuard)
        #expect(response.status == 200)
        #expect(client.connectionCount(for: .production) == 1)
        await client.shutdown(deadline: .now.advanced(by: .seconds(5)))
        #expect(client.connectionCount(for: .production) == 0)
    }

    @Test func refusesAServerOutsideTheTrustStore() async throws {
        let server = try await NGHTTPD()
        defer { server.stop() }
        let client = try Self.client(port: server.port, trust: .systemTrustStore)
        let error = try await #require(throws: APNsClientError.self) {
            try await client.send(try Self.notification(), timeout: hangGuard)
        }
        #expect(error.transportFailure == .connectFailed)
        await client.shutdown()
    }

    @Test func connectFailureEndsByTheDeadline() async throws {
        let refusing = try RefusingPort()
        let client = try Self.client(port: refusing.port, trust: .insecureNoVerification)
        defer { withExtendedLifetime(refusing) {} }
        let start = ContinuousClock.now
        let error = try await #require(throws: APNsClientError.self) {
            try await client.send(try Self.notification(), timeout: .milliseconds(500))
        }
        #expect(error.transportFailure == .connectFailed)
        #expect(ContinuousClock.now - start < .seconds(3))
        await client.shutdown()
    }

    /// A process exits once `shutdown` returns; a connection thread still freeing its TLS session then raced
    /// OpenSSL's exit-time clean-up ("double free or corruption" in a test tool). Connects that fail during
    /// the TLS handshake are the case that returned early: they reported before freeing.
    @Test func shutdownReturnsOnceEveryConnectionIsDoneWithOpenSSL() async throws {
        let listener = try SilentListener()  // accepts TCP, never speaks TLS
        let port = listener.port
        for round in 0..<20 {
            let client = try Self.client(port: port, trust: .insecureNoVerification, connectTimeout: .milliseconds(50 + 5 * round), maxConnections: 4)
            await #expect(throws: APNsClientError.self) {
                try await client.send(try Self.notification(), timeout: .milliseconds(20))
            }
            await client.shutdown()
            #expect(client.liveConnections == 0, "round \(round)")
        }
        withExtendedLifetime(listener) {}
    }

    @Test func queuesBeyondThePeersConcurrentStreamLimit() async throws {
        let server = try await NGHTTPD(extraArguments: ["-m", "4"])
        defer { server.stop() }
        let client = try Self.client(port: server.port, trust: .caFile(server.caFile), maxConnections: 1)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<200 { group.addTask { try await client.send(try Self.notification(i), timeout: hangGuard).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 200 && statuses.allSatisfy { $0 == 200 })
        #expect(client.maxConcurrentStreams(for: .production) == [4])
        await client.shutdown()
    }

    @Test func serverDeathMidBurstEndsEveryRequestDefinitely() async throws {
        let server = try await NGHTTPD()
        let client = try Self.client(port: server.port, trust: .caFile(server.caFile), connectTimeout: .seconds(1), maxConnections: 1)
        _ = try await client.send(try Self.notification(), timeout: hangGuard)
        // Errors are kept as thrown: a cancellation, a shutdown error or anything that is not an
        // `APNsClientError` naming its transport failure is not a definite end, and fails the check below.
        let results = await withTaskGroup(of: Result<Int, any Error>.self) { group in
            for i in 0..<300 {
                group.addTask {
                    do { return .success(try await client.send(try Self.notification(i), timeout: .seconds(5)).status) }
                    catch { return .failure(error) }
                }
            }
            server.stop()
            // The burst may be answered before the kill lands; these come after it (stop waits for the
            // process to end), so the check below always has failures to judge.
            for i in 300..<310 {
                group.addTask {
                    do { return .success(try await client.send(try Self.notification(i), timeout: .seconds(5)).status) }
                    catch { return .failure(error) }
                }
            }
            return await group.reduce(into: [Result<Int, any Error>]()) { $0.append($1) }
        }
        #expect(results.count == 310)
        let failures = results.filter { if case .failure = $0 { true } else { false } }.count
        #expect(failures >= 10, "the requests sent after the server died failed: \(failures) failures")
        for case .failure(let e) in results {
            let clientError = e as? APNsClientError
            #expect(clientError?.code == .transport && clientError?.transportFailure != nil,
                    "every failure is an APNsClientError naming a transport failure: \(e)")
        }
        await client.shutdown()
    }

    /// Headers of the `:path` a request carries, as nghttp2 would send them.
    private static func headers(_ prepared: PreparedRequest) -> [String: String] {
        Dictionary(fields(prepared).map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
    }

    /// The fields a request hands nghttp2, in order, with their flags.
    private static func fields(_ prepared: PreparedRequest, authorization: [UInt8]? = nil) -> [(name: String, value: String, flags: UInt8)] {
        prepared.withHeaders(authorization: authorization) { nva in
            nva.map { (String(decoding: UnsafeBufferPointer(start: $0.name, count: $0.namelen), as: UTF8.self),
                       String(decoding: UnsafeBufferPointer(start: $0.value, count: $0.valuelen), as: UTF8.self), $0.flags) }
        }
    }

    /// A finished request's header buffer is written again by the next request when nothing else holds it,
    /// and never while something does (a resend's stream, say): that one keeps its headers.
    @Test func aRequestBufferIsReusedOnlyWhenNoOneElseHoldsIt() throws {
        let buffers = ByteBufferPool(kept: 4, largestKept: 4096)
        let first = PreparedRequest(notification: try Self.notification(1), authority: "api.push.apple.com", buffer: buffers.take())
        let address = first.buffer.withUnsafeBufferPointer { $0.baseAddress }
        // Still held by `first`: the next request gets the buffer but must not write into it.
        buffers.give(first.buffer)
        var second: PreparedRequest? = PreparedRequest(notification: try Self.notification(2), authority: "api.push.apple.com", buffer: buffers.take())
        #expect(Self.headers(first)[":path"] == "/3/device/" + String(format: "%064x", 1), "the holder's headers are intact")
        #expect(Self.headers(second!)[":path"] == "/3/device/" + String(format: "%064x", 2))
        let secondAddress = second!.buffer.withUnsafeBufferPointer { $0.baseAddress }
        #expect(secondAddress != address, "a shared buffer is copied, not written")
        // Given back by its only holder: the next request writes into the same memory.
        buffers.give(second.take()!.buffer)
        let third = PreparedRequest(notification: try Self.notification(3), authority: "api.push.apple.com", buffer: buffers.take())
        #expect(third.buffer.withUnsafeBufferPointer { $0.baseAddress } == secondAddress, "an unshared buffer is reused")
        #expect(Self.headers(third)[":path"] == "/3/device/" + String(format: "%064x", 3))
        #expect(Self.headers(third)["apns-topic"] == "com.example.app" && Self.headers(third).count == Self.headers(first).count)
        // The same with a buffer of an unusual size, so that neither a fresh allocation (about 600 bytes) nor
        // malloc handing out a freed address again can pass for reuse: the same memory and its capacity.
        var large: [UInt8] = []
        large.reserveCapacity(3000)
        let largeAddress = large.withUnsafeBufferPointer { $0.baseAddress }
        buffers.give(large)
        large = []
        let fourth = PreparedRequest(notification: try Self.notification(4), authority: "api.push.apple.com", buffer: buffers.take())
        #expect(fourth.buffer.capacity >= 3000 && fourth.buffer.withUnsafeBufferPointer { $0.baseAddress } == largeAddress)
    }

    @Test func neverIndexesPathAndAuthorization() throws {
        let prepared = PreparedRequest(notification: try Self.notification(), authority: "api.push.apple.com")
        let flags = Self.fields(prepared, authorization: Array("bearer x.y.z".utf8))
        let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
        let noCopyName = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
        let lent = noCopyName | UInt8(NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
        let byName = Dictionary(flags.map { ($0.0, ($0.1, $0.2)) }, uniquingKeysWith: { a, _ in a })
        #expect(byName[":path"]?.1 == noIndex | lent)
        #expect(byName["authorization"]?.0 == "bearer x.y.z")
        #expect(byName[":method"]?.0 == "POST")
        #expect(byName["apns-topic"]?.1 == lent)
        #expect(byName["apns-push-type"]?.0 == "alert")
        #expect(byName["apns-priority"]?.0 == "10")
        #expect(byName["apns-id"]?.1 == noIndex | lent)
    }

    /// The request's own fields are lent to nghttp2 (its buffer outlives the HEADERS frame); the provider
    /// token is not: a rotation may replace it before nghttp2 packs the frame, so nghttp2 copies its value.
    @Test func lendsItsFieldsButNotTheProviderToken() throws {
        let prepared = PreparedRequest(notification: try Self.notification(), authority: "api.push.apple.com")
        let fields = Self.fields(prepared, authorization: Array("bearer x.y.z".utf8))
        let noCopyValue = UInt8(NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
        let authorization = try #require(fields.first { $0.name == "authorization" })
        #expect(authorization.flags & noCopyValue == 0, "the token's value must be copied")
        #expect(authorization.flags & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0)
        for field in fields where field.name != "authorization" {
            #expect(field.flags & noCopyValue != 0, "\(field.name) is in the request's buffer: lent, not copied")
        }
    }

    /// nghttp2 lowercases only the names it copies: a name lent to it goes out as written, and a server
    /// rejects an uppercase one (RFC 9113, 8.2.1). The request writes them lowercase.
    @Test func writesACallersHeaderNamesInLowercase() {
        let prepared = PreparedRequest(
            method: "GET", path: "/1/apps/com.example/channels", authority: "api-manage-broadcast.push.apple.com",
            headers: [(name: "Apns-Request-Id", value: "Mixed-Case-Value")], body: [], maxResponseBody: 1024
        )
        let fields = Self.fields(prepared)
        #expect(fields.contains { $0.name == "apns-request-id" && $0.value == "Mixed-Case-Value" })
        #expect(!fields.contains { $0.name.contains(where: \.isUppercase) })
    }
}
