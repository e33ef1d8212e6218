import APNsCore
import Foundation
import TestSupport
import Testing
@testable import APNsClient

/// Reaching APNs through an HTTP proxy: the CONNECT exchange on its own, then through Debian's tinyproxy to
/// the mock APNs (TLS and the provider token end to end through the tunnel).
@Suite struct ProxyTests {
    @Test func proxyURLs() throws {
        #expect(try HTTPProxy(url: "http://proxy.internal:3128") == HTTPProxy(host: "proxy.internal", port: 3128))
        #expect(try HTTPProxy(url: "http://proxy.internal/") == HTTPProxy(host: "proxy.internal", port: 80))
        #expect(try HTTPProxy(url: "http://[fd00::1]:8080") == HTTPProxy(host: "fd00::1", port: 8080))
        let refused: [(String, String)] = [
            ("https://proxy:3128", "must start with http://"),
            ("proxy:3128", "must be http://host:port"),
            ("http://alice:secret@proxy:3128", "must not contain credentials"),
            ("http://proxy:3128/path", "without a path"),
            ("http://proxy:99999", "invalid port '99999'"),
            ("http://:3128", "has no host"),
        ]
        for (url, message) in refused {
            let error = #expect(throws: APNsClientError.self) { try HTTPProxy(url: url) }
            #expect(error?.message.contains(message) == true, "\(url): \(String(describing: error))")
            #expect(error?.message.contains("secret") != true, "credentials are never repeated")
        }
        let credentials = try HTTPProxy.Credentials(parsing: "relay:pa:ss word\n")
        #expect(credentials == HTTPProxy.Credentials(user: "relay", password: "pa:ss word"))
        #expect("\(credentials)" == "relay:<redacted>")
        #expect(throws: APNsClientError.self) { try HTTPProxy.Credentials(parsing: "no-colon") }
        #expect(throws: APNsClientError.self) { try HTTPProxy.Credentials(parsing: "a:b\nc:d") }
    }

    @Test func theConnectExchange() {
        let proxy = HTTPProxy(host: "proxy", port: 3128, credentials: .init(user: "Aladdin", password: "open sesame"))
        let tunnel = ProxyTunnel(proxy: proxy, targetHost: "api.push.apple.com", targetPort: 443)
        #expect(String(decoding: tunnel.request, as: UTF8.self) == "CONNECT api.push.apple.com:443 HTTP/1.1\r\nHost: api.push.apple.com:443\r\nProxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n")
        let answer = { (text: String) in tunnel.answer(Array(text.utf8)) }
        #expect(answer("HTTP/1.1 200 Connection established\r\n") == .incomplete)
        #expect(answer("HTTP/1.1 200 Connection established\r\nProxy-agent: tinyproxy\r\n\r\n") == .established)
        #expect(answer("HTTP/1.0 200 OK\r\n\r\n") == .established)
        guard case .refused(let rejected) = answer("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"),
              case .refused(let forbidden) = answer("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"),
              case .refused(let garbage) = answer("SSH-2.0-OpenSSH\r\n\r\n"),
              case .refused(let early) = answer("HTTP/1.1 200 OK\r\n\r\n\u{16}\u{03}")
        else {
            Issue.record("refusals not recognised")
            return
        }
        #expect(rejected.contains("rejected the credentials") && !rejected.contains("sesame"), "\(rejected)")
        #expect(forbidden == "proxy http://proxy:3128 (user Aladdin) refused CONNECT to api.push.apple.com:443: HTTP/1.1 403 Forbidden")
        #expect(garbage.contains("did not answer CONNECT in HTTP/1.x"), "\(garbage)")
        #expect(early.contains("sent bytes after accepting CONNECT"), "\(early)")
        let anonymous = ProxyTunnel(proxy: HTTPProxy(host: "proxy", port: 3128), targetHost: "fd00::2", targetPort: 443)
        #expect(String(decoding: anonymous.request, as: UTF8.self) == "CONNECT [fd00::2]:443 HTTP/1.1\r\nHost: [fd00::2]:443\r\n\r\n")
        guard case .refused(let unauthenticated) = anonymous.answer(Array("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n".utf8)) else {
            Issue.record("407 not a refusal")
            return
        }
        #expect(unauthenticated.contains("requires authentication") && unauthenticated.contains("apns.proxy.credentialsFile"), "\(unauthenticated)")
    }

    @Test func pushesGoThroughTinyproxy() async throws {
        let proxy = try await TinyProxy.start(basicAuth: (user: "relay", password: "s3cret"))
        defer { proxy.stop() }
        let mock = try await MockFixture.start()
        let client = try mock.client { configuration in
            configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port, credentials: .init(user: "relay", password: "s3cret"))
        }
        for i in 0..<3 {
            let response = try await client.send(try MockFixture.notification(i), timeout: hangGuard)
            #expect(response.status == 200, "\(response)")
        }
        #expect(mock.server.statistics.accepted == 3)
        #expect(proxy.log.contains("CONNECT 127.0.0.1:\(mock.port) HTTP/1.1"), "the tunnel went through tinyproxy: \(proxy.log)")
        await client.shutdown()
        await mock.stop()
    }

    @Test func aProxyThatRefusesSaysWhy() async throws {
        let proxy = try await TinyProxy.start(basicAuth: (user: "relay", password: "s3cret"))
        defer { proxy.stop() }
        let mock = try await MockFixture.start()
        let cases: [(HTTPProxy.Credentials?, String)] = [
            (.init(user: "relay", password: "wrong"), "rejected the credentials (HTTP/1.0 401"),
            (nil, "requires authentication (HTTP/1.0 407"),
        ]
        for (credentials, message) in cases {
            let client = try mock.client { configuration in
                configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port, credentials: credentials)
                configuration.pool.reconnectBackoffBase = .seconds(5)
            }
            // The failed connect ends the wait at once; the long deadline only guards against a hang (a 5 s
            // one expired before the connect had finished in a single-core run).
            let error = await #expect(throws: APNsClientError.self) {
                try await client.send(try MockFixture.notification(), timeout: hangGuard)
            }
            #expect(error?.transportFailure == .connectFailed, "\(String(describing: error))")
            #expect(error?.message.contains(message) == true, "\(String(describing: error))")
            #expect(error?.message.contains("wrong") != true, "the password is never repeated")
            await client.shutdown()
        }
        #expect(mock.server.statistics.requests == 0)
        await mock.stop()
    }

    @Test func aProxyThatIsDownIsNamed() async throws {
        let mock = try await MockFixture.start()
        let refusing = try RefusingPort()
        let closedPort = refusing.port
        let client = try mock.client { configuration in
            configuration.proxy = HTTPProxy(host: "127.0.0.1", port: closedPort)
            configuration.pool.reconnectBackoffBase = .seconds(5)
        }
        let error = await #expect(throws: APNsClientError.self) {
            try await client.send(try MockFixture.notification(), timeout: hangGuard)
        }
        #expect(error?.message.contains("cannot connect to proxy 127.0.0.1:\(closedPort)") == true, "\(String(describing: error))")
        withExtendedLifetime(refusing) {}
        await client.shutdown()
        await mock.stop()
    }
}
