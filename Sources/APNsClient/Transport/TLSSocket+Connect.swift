import COpenSSL
import Glibc
import ServiceSupport

/// Connection set-up, blocking, on a connector thread of its own: DNS (a fresh lookup per connection, as Apple
/// asks; glibc has no non-blocking resolver), TCP, the proxy's tunnel if there is one, the TLS handshake. The
/// established socket is then handed to an event loop. At most `apns.pool.maxConcurrentConnects` run at once.
extension TLSSocket {
    /// Connects to `configuration.host` (through its proxy, if any) and completes the TLS handshake (SNI, ALPN
    /// h2, verification) by `deadline`.
    /// - Throws: `APNsClientError` with `TransportFailure.connectFailed`.
    static func connect(_ configuration: APNsConnectionConfiguration, tls: TLSContext, deadline: MonotonicInstant) throws(APNsClientError) -> TLSSocket {
        let fd: Int32
        if let proxy = configuration.proxy {
            fd = try openSocket(host: proxy.host, port: proxy.port, deadline: deadline, what: "proxy")
            do {
                try openTunnel(fd: fd, through: proxy, to: configuration, deadline: deadline)
            } catch {
                Glibc.close(fd)
                throw error
            }
        } else {
            fd = try openSocket(host: configuration.host, port: configuration.port, deadline: deadline, what: nil)
        }
        return try handshake(fd: fd, host: configuration.host, tls: tls, deadline: deadline)
    }

    /// Resolves `host` afresh and connects to the first address that answers.
    /// - Parameter what: `"proxy"` when `host` is the proxy, for the error messages.
    private static func openSocket(host: String, port: Int, deadline: MonotonicInstant, what: String?) throws(APNsClientError) -> Int32 {
        let named = what.map { "\($0) " } ?? ""
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        // A fresh lookup per connection, as Apple asks (no cached addresses).
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            throw APNsClientError(transport: .connectFailed, "cannot resolve \(named)\(host): \(String(cString: gai_strerror(rc)))", underlyingCode: Int(rc))
        }
        defer { freeaddrinfo(first) }
        var lastError: Int32 = 0
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let ai = candidate {
            candidate = ai.pointee.ai_next
            let s = socket(ai.pointee.ai_family, ai.pointee.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), ai.pointee.ai_protocol)
            guard s >= 0 else { lastError = errno; continue }
            if Glibc.connect(s, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                if wait(fd: s, events: Int16(POLLOUT), until: deadline) {
                    var soError: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(s, SOL_SOCKET, SO_ERROR, &soError, &length)
                    if soError == 0 {
                        var one: Int32 = 1
                        setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                        return s
                    }
                    lastError = soError
                } else {
                    lastError = ETIMEDOUT
                }
            } else {
                lastError = errno
            }
            Glibc.close(s)
        }
        throw APNsClientError(transport: .connectFailed, "cannot connect to \(named)\(host):\(port): \(String(cString: strerror(lastError)))", underlyingCode: Int(lastError))
    }

    /// Asks the proxy for a tunnel to APNs (`CONNECT host:port`) on the connected socket and reads its answer.
    /// The answer is read byte by byte: whatever follows it belongs to the TLS session.
    private static func openTunnel(
        fd: Int32, through proxy: HTTPProxy, to configuration: APNsConnectionConfiguration, deadline: MonotonicInstant
    ) throws(APNsClientError) {
        let tunnel = ProxyTunnel(proxy: proxy, targetHost: configuration.host, targetPort: configuration.port)
        let request = tunnel.request
        var sent = 0
        while sent < request.count {
            let n = request.withUnsafeBytes { send(fd, $0.baseAddress! + sent, request.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 { sent += n; continue }
            guard n < 0, errno == EAGAIN || errno == EINTR else {
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy): sending CONNECT failed: \(String(cString: strerror(errno)))", underlyingCode: Int(errno))
            }
            guard wait(fd: fd, events: Int16(POLLOUT), until: deadline) else {
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy) did not take the CONNECT request before the connect timeout")
            }
        }
        var received: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n == 1 {
                received.append(byte)
                guard byte == UInt8(ascii: "\n") || received.count > ProxyTunnel.maximumResponseBytes else { continue }
                switch tunnel.answer(received) {
                case .incomplete: continue
                case .established: return
                case .refused(let message): throw APNsClientError(transport: .connectFailed, message)
                }
            }
            if n == 0 {
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy) closed the connection before answering CONNECT to \(configuration.host):\(configuration.port)")
            }
            guard errno == EAGAIN || errno == EINTR else {
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy): reading its answer failed: \(String(cString: strerror(errno)))", underlyingCode: Int(errno))
            }
            guard wait(fd: fd, events: Int16(POLLIN), until: deadline) else {
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy) did not answer CONNECT to \(configuration.host):\(configuration.port) before the connect timeout")
            }
        }
    }

    private static func handshake(fd: Int32, host: String, tls: TLSContext, deadline: MonotonicInstant) throws(APNsClientError) -> TLSSocket {
        guard let ssl = tls.withContext({ SSL_new($0) }) else {
            Glibc.close(fd)
            throw APNsClientError(transport: .connectFailed, "SSL_new failed")
        }
        // Freed here on failure; on success the returned socket owns both.
        var established = false
        defer {
            if !established {
                SSL_free(ssl)
                Glibc.close(fd)
            }
        }
        guard SSL_set_fd(ssl, fd) == 1 else {
            throw APNsClientError(transport: .connectFailed, "cannot attach the TLS session to the socket for \(host)", underlyingCode: Int(ERR_get_error()))
        }
        let isIP = isIPAddress(host)
        if !isIP, copenssl_SSL_set_tlsext_host_name(ssl, host) != 1 {
            throw APNsClientError(transport: .connectFailed, "cannot set the TLS server name (SNI) to \(host)", underlyingCode: Int(ERR_get_error()))
        }
        if tls.verifiesPeer {
            // A setter that fails leaves no name to check: the handshake would accept any trusted certificate.
            // The length is explicit so that a name with a NUL in it is refused rather than checked cut short.
            guard let param = SSL_get0_param(ssl),
                isIP ? X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1 : X509_VERIFY_PARAM_set1_host(param, host, host.utf8.count) == 1
            else {
                throw APNsClientError(
                    transport: .connectFailed, "cannot set the name to verify the server's certificate against (\(host)); not connecting",
                    underlyingCode: Int(ERR_get_error()))
            }
        }
        while true {
            ERR_clear_error()
            let rc = SSL_connect(ssl)
            if rc == 1 { break }
            let error = SSL_get_error(ssl, rc)
            let events: Int16
            switch error {
            case SSL_ERROR_WANT_READ: events = Int16(POLLIN)
            case SSL_ERROR_WANT_WRITE: events = Int16(POLLOUT)
            default:
                let sslError = ERR_get_error()
                let verify = SSL_get_verify_result(ssl)
                let detail = verify != X509_V_OK ? " (certificate: \(String(cString: X509_verify_cert_error_string(verify))))" : ""
                throw APNsClientError(transport: .connectFailed, "TLS handshake with \(host) failed\(detail)", underlyingCode: Int(sslError))
            }
            guard wait(fd: fd, events: events, until: deadline) else {
                throw APNsClientError(transport: .connectFailed, "TLS handshake with \(host) timed out")
            }
        }
        var alpn: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpn, &alpnLength)
        // APNs selects h2. A server that selects nothing (or something else) is not APNs, or a TLS-terminating
        // middlebox that would take HTTP/2 frames for HTTP/1.1: refused before a byte of a request is sent.
        let selected = alpn.map { Array(UnsafeBufferPointer(start: $0, count: Int(alpnLength))) } ?? []
        guard selected.elementsEqual("h2".utf8) else {
            let what = selected.isEmpty ? "selected no ALPN protocol" : "selected ALPN protocol '\(printable(alpn: selected))'"
            throw APNsClientError(transport: .connectFailed, "TLS server \(host) \(what), not h2: it does not speak HTTP/2 as APNs does; not using the connection")
        }
        established = true
        return TLSSocket(fd: fd, ssl: ssl)
    }

    private static func wait(fd: Int32, events: Int16, until deadline: MonotonicInstant) -> Bool {
        while true {
            let left = (deadline - .now).milliseconds
            if left <= 0 { return false }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let rc = poll(&p, 1, Int32(min(left, 1000)))
            if rc > 0 { return true }
            if rc < 0 && errno != EINTR { return false }
        }
    }

    /// The ALPN protocol a server selected, for a message: at most 32 printable ASCII characters, the rest escaped.
    static func printable(alpn bytes: [UInt8]) -> String {
        let shown = bytes.prefix(32).map { byte in
            (0x20..<0x7f).contains(byte) && byte != UInt8(ascii: "'") ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
        }
        return shown.joined() + (bytes.count > 32 ? "…" : "")
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
