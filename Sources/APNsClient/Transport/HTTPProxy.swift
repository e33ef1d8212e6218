/// An HTTP proxy that connections to APNs go through, with `CONNECT` (RFC 9110 §9.3.6): the proxy opens a
/// TCP tunnel to APNs and the TLS handshake, certificate checks and HTTP/2 run end to end through it, as
/// without a proxy. For networks where only a proxy may reach the internet.
package struct HTTPProxy: Sendable, Hashable, CustomStringConvertible {
    /// `user:password` for the proxy's Basic authentication (`Proxy-Authorization`).
    package struct Credentials: Sendable, Hashable, CustomStringConvertible {
        package var user: String
        package var password: String
        package init(user: String, password: String) {
            self.user = user
            self.password = password
        }

        /// `user:password` (the form of a credentials file; surrounding whitespace and a final newline are
        /// ignored).
        package init(parsing text: String) throws(APNsClientError) {
            let line = text.trimmingWhitespace()
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex, !line.contains("\n") else {
                throw APNsClientError(.invalidConfiguration, "proxy credentials must be one line, user:password")
            }
            self.init(user: String(line[..<colon]), password: String(line[line.index(after: colon)...]))
        }

        package var description: String { "\(user):<redacted>" }
    }

    package var host: String
    package var port: Int
    package var credentials: Credentials?

    package init(host: String, port: Int, credentials: Credentials? = nil) {
        self.host = host
        self.port = port
        self.credentials = credentials
    }

    /// From `http://host:port` (port 80 when left out; IPv6 hosts in brackets). Credentials do not belong in
    /// the URL, where they would be printed with the configuration: pass them separately.
    package init(url: String, credentials: Credentials? = nil) throws(APNsClientError) {
        // Never repeat a password someone put in the URL.
        let shown = url.contains("@") ? "<a URL with credentials>" : "'\(url)'"
        let invalid = { (why: String) in APNsClientError(.invalidConfiguration, "proxy URL \(shown) \(why)") }
        guard url.hasPrefix("http://") else {
            throw url.contains("://")
                ? invalid("must start with http:// (the proxy is spoken to in plain HTTP; the tunnel through it is TLS)")
                : invalid("must be http://host:port")
        }
        var rest = url.dropFirst("http://".count)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("@") else {
            throw invalid("must not contain credentials: put user:password in a credentials file (apns.proxy.credentialsFile)")
        }
        guard !rest.contains("/"), !rest.contains("?") else { throw invalid("must be http://host:port, without a path") }
        let host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("has an unclosed [ in its host") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("must be http://[ipv6]:port") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw invalid("has no host") }
        var port = 80
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else { throw invalid("has an invalid port '\(portText)'") }
            port = value
        }
        self.init(host: String(host), port: port, credentials: credentials)
    }

    /// `host:port` as it goes in a request line (IPv6 in brackets).
    static func authority(host: String, port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    package var description: String {
        "http://\(Self.authority(host: host, port: port))" + (credentials.map { " (user \($0.user))" } ?? "")
    }
}

/// The CONNECT exchange, without I/O: the request to send and what the proxy's answer means.
struct ProxyTunnel {
    /// A proxy's answer is a status line and headers; anything longer is not an answer to CONNECT.
    static let maximumResponseBytes = 16 * 1024

    let proxy: HTTPProxy
    let targetHost: String
    let targetPort: Int

    var request: [UInt8] {
        let target = HTTPProxy.authority(host: targetHost, port: targetPort)
        var text = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let credentials = proxy.credentials {
            text += "Proxy-Authorization: Basic \(Base64.encode(Array("\(credentials.user):\(credentials.password)".utf8)))\r\n"
        }
        return Array((text + "\r\n").utf8)
    }

    enum Answer: Equatable {
        /// More bytes are needed.
        case incomplete
        /// 2xx: the tunnel is open.
        case established
        /// The proxy refused: a message that names the proxy, the target and the proxy's status.
        case refused(String)
    }

    /// What the bytes received so far say.
    func answer(_ received: [UInt8]) -> Answer {
        guard let end = Self.endOfHeaders(received) else {
            return received.count > Self.maximumResponseBytes
                ? .refused("proxy \(proxy) sent no valid answer to CONNECT (more than \(Self.maximumResponseBytes) bytes of headers)")
                : .incomplete
        }
        // A proxy sends nothing after its answer until the tunnel carries the server's bytes, and the server
        // speaks only after the TLS ClientHello: bytes here mean the answer was not what it seemed.
        let statusLine = String(decoding: received.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            return .refused("proxy \(proxy) did not answer CONNECT in HTTP/1.x: '\(statusLine.prefix(80))'")
        }
        let target = HTTPProxy.authority(host: targetHost, port: targetPort)
        switch status {
        case 200..<300:
            guard end == received.count else {
                return .refused("proxy \(proxy) sent bytes after accepting CONNECT to \(target), before the TLS handshake")
            }
            return .established
        case 401, 407:  // 407 is the standard answer; tinyproxy, for one, answers CONNECT with 401
            return .refused(proxy.credentials == nil
                ? "proxy \(proxy) requires authentication (\(statusLine)): set apns.proxy.credentialsFile"
                : "proxy \(proxy) rejected the credentials (\(statusLine))")
        default:
            return .refused("proxy \(proxy) refused CONNECT to \(target): \(statusLine)")
        }
    }

    /// The index just past `\r\n\r\n`, if the headers are complete.
    private static func endOfHeaders(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count where bytes[index] == 0x0A && bytes[index - 1] == 0x0D
            && bytes[index - 2] == 0x0A && bytes[index - 3] == 0x0D {
            return index + 1
        }
        return nil
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> Substring {
        let scalars = self[...]
        guard let first = scalars.firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.isWhitespace })!
        return Substring(scalars[first...last])
    }
}
