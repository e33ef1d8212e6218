import Foundation
import Logging
import RelaySandbox
import TestSupport
import Testing

/// The admin endpoint under hostile peers: `apns-relay run` as a separate process, its admin port on
/// 127.0.0.1, and raw TCP connections that hold it (idle, half a request, too large, trickling).
///
/// The limits are the ones README.md states for `admin.host` / `admin.port`; the relay does not let them be
/// configured, so the tests take them from there, not from the code.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct AdminServerTests {
    /// Connections the endpoint holds at most.
    static let cap = 64
    /// From accept to answer.
    static let requestTimeout = Duration.seconds(10)
    /// Request line and headers.
    static let maxRequestHeadBytes = 8192
    /// Descriptors left to the relay beyond what it uses for its own work, on top of what a test gives the cap.
    static let spareDescriptors = 32

    let logger = Logger.quiet("admin")

    /// Starts a relay whose admin endpoint is on 127.0.0.1 and answers, runs `body`, then stops it.
    private func withRelayProcess(_ body: (RelayProcess, Int) async throws -> Void) async throws {
        try await withSandbox(logger: logger) { sandbox in
            let port = try freeLocalPort()
            var environment = sandbox.relayEnvironment(groupID: "admin-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_ADMIN_HOST"] = "127.0.0.1"
            environment["APNS_RELAY_ADMIN_PORT"] = String(port)
            environment["APNS_RELAY_LOG_FORMAT"] = "text"
            let relay = try RelayProcess(environment: environment)
            try await eventually("/healthz answers 200", within: .seconds(30)) {
                try await http("http://127.0.0.1:\(port)/healthz").status == 200
            }
            try await body(relay, port)
            _ = await relay.terminate(timeout: .seconds(30))
        }
    }

    /// Opens `count` connections, a quarter of them sending half a request (the request line and one header,
    /// never the blank line that ends the head), the rest nothing.
    private func hold(_ count: Int, port: Int) throws -> [RawTCPPeer] {
        try (0..<count).map { n in
            let peer = try RawTCPPeer(port: port)
            if n % 4 == 0 { peer.send("GET /healthz HTTP/1.1\r\nHost: relay\r\n") }
            return peer
        }
    }

    /// While idle and half-sent connections hold more than the cap, and more than the descriptors the relay
    /// may open, every probe is answered 200: each new connection closes the oldest one that has sent no
    /// complete request. The relay is left the cap's descriptors and a few more, so without the cap the held
    /// connections would take them all (the control below shows that this starves the probes); each round
    /// adds connections before its probe, so the cap is full of held ones whenever a probe arrives.
    @Test func probesAreAnsweredWhileIdleConnectionsHoldMoreThanTheCap() async throws {
        try await withRelayProcess { relay, port in
            try limitDescriptors(ofProcess: relay.process.processIdentifier, headroom: Self.cap + Self.spareDescriptors)
            var held = try hold(Self.cap + 2 * Self.spareDescriptors, port: port)
            #expect(
                held.count > Self.cap + Self.spareDescriptors,
                "the held connections alone would exhaust the descriptors")
            let rounds = 10
            for round in 1...rounds {
                held += try hold(8, port: port)
                let probe = try await http("http://127.0.0.1:\(port)/healthz")
                #expect(
                    probe.status == 200,
                    "round \(round) with \(held.count) connections held: /healthz answered \(probe.status); log:\n\(relay.log.suffix(2000))"
                )
            }
            let metrics = try await http("http://127.0.0.1:\(port)/metrics")
            #expect(metrics.status == 200)
            let open = try #require(
                metric(metrics.body, "apns_relay_admin_connections"), "the open-connections gauge is exported")
            #expect(open <= Double(Self.cap), "\(open) admin connections open, over the cap of \(Self.cap)")
            // None of the held connections closes by itself: the endpoint closed all but a cap's worth, to make
            // room (or at their deadline, if the rounds outlasted it).
            let evicted = metric(metrics.body, #"apns_relay_admin_connections_refused_total{reason="evicted"}"#) ?? 0
            let timedOut = metric(metrics.body, #"apns_relay_admin_connections_refused_total{reason="timeout"}"#) ?? 0
            #expect(
                evicted + timedOut >= Double(held.count - Self.cap),
                "closed \(evicted) to make room and \(timedOut) at the deadline, of \(held.count) held")
            withExtendedLifetime(held) {}
        }
    }

    /// The control: the same connections against a relay left fewer descriptors than the cap (so the cap never
    /// comes into play) take every descriptor, and the probes are not answered: they wait, unaccepted, behind
    /// the held connections. This is the failure the cap prevents.
    @Test func withFewerDescriptorsThanTheCapHeldConnectionsStarveTheProbes() async throws {
        try await withRelayProcess { relay, port in
            try limitDescriptors(ofProcess: relay.process.processIdentifier, headroom: Self.spareDescriptors)
            let held = try hold(Self.cap + 2 * Self.spareDescriptors, port: port)
            for attempt in 1...3 {
                let probe = try await http("http://127.0.0.1:\(port)/healthz")
                #expect(
                    probe.status != 200,
                    "attempt \(attempt): /healthz answered although \(held.count) connections hold every descriptor")
            }
            withExtendedLifetime(held) {}
        }
    }

    /// Request line and headers over 8 KiB are answered 431, a request with a body 413, one that is not HTTP 400,
    /// and a head of exactly 8 KiB is served; each refusal is counted. The refusal arrives intact although the
    /// peer sent more than was read (a close with unread input would reset the connection).
    @Test func oversizedAndMalformedRequestsAreRefusedAndCounted() async throws {
        try await withRelayProcess { relay, port in
            func exchange(_ request: String) async throws -> String {
                let peer = try RawTCPPeer(port: port)
                peer.send(request)
                let (answer, closed) = await peer.readUntilClosed(within: .seconds(10))
                #expect(closed, "the endpoint closes after its answer; got \(answer.prefix(200))")
                return answer
            }
            let requestLine = "GET /healthz HTTP/1.1\r\nhost: relay\r\n"
            func head(padTo size: Int) -> String {
                let padding = size - requestLine.utf8.count - "x-pad: \r\n\r\n".utf8.count
                return requestLine + "x-pad: " + String(repeating: "a", count: padding) + "\r\n\r\n"
            }
            let fits = head(padTo: Self.maxRequestHeadBytes)
            #expect(fits.utf8.count == Self.maxRequestHeadBytes)
            let served = try await exchange(fits)
            #expect(
                served.hasPrefix("HTTP/1.1 200 "),
                "a head of exactly \(Self.maxRequestHeadBytes) bytes is served: \(served.prefix(200))")

            let tooLarge = try await exchange(head(padTo: 2 * Self.maxRequestHeadBytes))
            #expect(
                tooLarge.hasPrefix("HTTP/1.1 431 "),
                "a head of \(2 * Self.maxRequestHeadBytes) bytes: \(tooLarge.prefix(200))")
            let oneOver = try await exchange(head(padTo: Self.maxRequestHeadBytes + 1))
            #expect(
                oneOver.hasPrefix("HTTP/1.1 431 "),
                "a head of \(Self.maxRequestHeadBytes + 1) bytes: \(oneOver.prefix(200))")

            let withBody = try await exchange(requestLine + "content-length: 10\r\n\r\n0123456789")
            #expect(withBody.hasPrefix("HTTP/1.1 413 "), "a request with a body: \(withBody.prefix(200))")
            let chunked = try await exchange(requestLine + "transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            #expect(chunked.hasPrefix("HTTP/1.1 413 "), "a chunked request: \(chunked.prefix(200))")

            let garbage = try await exchange("HELLO\r\n\r\n")
            #expect(garbage.hasPrefix("HTTP/1.1 400 "), "not HTTP: \(garbage.prefix(200))")

            let metrics = try await http("http://127.0.0.1:\(port)/metrics").body
            #expect(metric(metrics, #"apns_relay_admin_connections_refused_total{reason="malformed"}"#) == 1)
            #expect(
                metric(metrics, #"apns_relay_admin_connections_refused_total{reason="too_large"}"#) == 4,
                "\(metrics.split(separator: "\n").filter { $0.contains("admin") })")
        }
    }

    /// A connection that sends nothing, and one that trickles its headers a byte at a time (slow loris: never
    /// idle long), are both closed at the request timeout, counted, and not before it.
    @Test func connectionsWithoutACompleteRequestAreClosedAtTheRequestTimeout() async throws {
        try await withRelayProcess { relay, port in
            let start = ContinuousClock.now
            let idle = try RawTCPPeer(port: port)
            let trickling = try RawTCPPeer(port: port)
            trickling.send("GET /healthz HTTP/1.1\r\n")
            let trickle = Task {
                // The peer's input, not a wait for the verdict: a byte every 200 ms until the endpoint closes.
                while !Task.isCancelled, trickling.send("x") { try? await Task.sleep(for: .milliseconds(200)) }
            }
            defer { trickle.cancel() }
            // A hang guard well above the timeout: the close is awaited as an event.
            let guardTime = Self.requestTimeout + .seconds(20)
            func close(of peer: RawTCPPeer) async -> (received: String, closed: Bool, after: Duration) {
                let (received, closed) = await peer.readUntilClosed(within: guardTime)
                return (received, closed, ContinuousClock.now - start)
            }
            async let idleEnd = close(of: idle)
            async let trickleEnd = close(of: trickling)
            for (name, end) in await [("idle", idleEnd), ("trickling", trickleEnd)] {
                #expect(end.closed, "the \(name) connection was not closed within \(guardTime)")
                #expect(
                    end.after >= Self.requestTimeout,
                    "the \(name) connection was closed after \(end.after), before the request timeout of \(Self.requestTimeout)"
                )
                #expect(
                    end.received.isEmpty,
                    "the \(name) connection was closed without an answer: \(end.received.prefix(200))")
            }
            let metrics = try await http("http://127.0.0.1:\(port)/metrics").body
            #expect(
                metric(metrics, #"apns_relay_admin_connections_refused_total{reason="malformed"}"#) == 0,
                "a head cut short by the close is not a malformed request")
            #expect(
                metric(metrics, #"apns_relay_admin_connections_refused_total{reason="timeout"}"#) == 2,
                "\(metrics.split(separator: "\n").filter { $0.contains("admin") })")
        }
    }
}
