import CNGHTTP2
import COpenSSL
import Glibc

/// Connection set-up on the I/O thread: DNS, TCP, the proxy's tunnel if there is one, TLS handshake, HTTP/2
/// session.
extension ConnectionIO {
    /// Resolves `host` afresh and connects to the first address that answers.
    /// - Parameter what: `"proxy"` when `host` is the proxy, for the error messages.
    func openSocket(host: String, port: Int, deadline: ContinuousClock.Instant, what: String?) throws(APNsClientError) {
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
                if Self.wait(fd: s, events: Int16(POLLOUT), until: deadline) {
                    var soError: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(s, SOL_SOCKET, SO_ERROR, &soError, &length)
                    if soError == 0 {
                        var one: Int32 = 1
                        setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                        fd = s
                        return
                    }
                    lastError = soError
                } else {
                    lastError = ETIMEDOUT
                }
            } else {
                lastError = errno
            }
            close(s)
        }
        throw APNsClientError(transport: .connectFailed, "cannot connect to \(named)\(host):\(port): \(String(cString: strerror(lastError)))", underlyingCode: Int(lastError))
    }

    /// Asks the proxy for a tunnel to APNs (`CONNECT host:port`) on the connected socket and reads its answer.
    /// The answer is read byte by byte: whatever follows it belongs to the TLS session.
    func openTunnel(through proxy: HTTPProxy, deadline: ContinuousClock.Instant) throws(APNsClientError) {
        let tunnel = ProxyTunnel(proxy: proxy, targetHost: connection.configuration.host, targetPort: connection.configuration.port)
        let request = tunnel.request
        var sent = 0
        while sent < request.count {
            let n = request.withUnsafeBytes { send(fd, $0.baseAddress! + sent, request.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 { sent += n; continue }
            guard n < 0, errno == EAGAIN || errno == EINTR else {
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy): sending CONNECT failed: \(String(cString: strerror(errno)))", underlyingCode: Int(errno))
            }
            guard Self.wait(fd: fd, events: Int16(POLLOUT), until: deadline) else {
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
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy) closed the connection before answering CONNECT to \(connection.configuration.host):\(connection.configuration.port)")
            }
            guard errno == EAGAIN || errno == EINTR else {
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy): reading its answer failed: \(String(cString: strerror(errno)))", underlyingCode: Int(errno))
            }
            guard Self.wait(fd: fd, events: Int16(POLLIN), until: deadline) else {
                throw APNsClientError(transport: .connectFailed, "proxy \(proxy) did not answer CONNECT to \(connection.configuration.host):\(connection.configuration.port) before the connect timeout")
            }
        }
    }

    func handshake(deadline: ContinuousClock.Instant) throws(APNsClientError) {
        let host = connection.configuration.host
        guard let ssl = tls.withContext({ SSL_new($0) }) else {
            throw APNsClientError(transport: .connectFailed, "SSL_new failed")
        }
        self.ssl = ssl  // freed in teardown
        SSL_set_fd(ssl, fd)
        let isIP = Self.isIPAddress(host)
        if !isIP { _ = copenssl_SSL_set_tlsext_host_name(ssl, host) }
        if tls.verifiesPeer {
            let param = SSL_get0_param(ssl)
            if isIP { X509_VERIFY_PARAM_set1_ip_asc(param, host) } else { X509_VERIFY_PARAM_set1_host(param, host, 0) }
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
            guard Self.wait(fd: fd, events: events, until: deadline) else {
                throw APNsClientError(transport: .connectFailed, "TLS handshake with \(host) timed out")
            }
        }
        var alpn: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpn, &alpnLength)
        // APNs also speaks HTTP/2 without ALPN (prior knowledge); anything other than h2 is not HTTP/2.
        if alpnLength > 0, let alpn, !UnsafeBufferPointer(start: alpn, count: Int(alpnLength)).elementsEqual("h2".utf8) {
            throw APNsClientError(transport: .connectFailed, "server negotiated ALPN \(String(decoding: UnsafeBufferPointer(start: alpn, count: Int(alpnLength)), as: UTF8.self)), not h2")
        }
    }

    func startSession() throws(APNsClientError) {
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw APNsClientError(transport: .connectFailed, "nghttp2_session_callbacks_new failed")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, NGHTTP2Callbacks.onFrameRecv)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, NGHTTP2Callbacks.onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, NGHTTP2Callbacks.onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, NGHTTP2Callbacks.onStreamClose)
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, NGHTTP2Callbacks.onFrameNotSend)
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else {
            throw APNsClientError(transport: .connectFailed, "nghttp2_option_new failed")
        }
        defer { nghttp2_option_del(option) }
        // Until the server's SETTINGS arrive, assume one stream (APNs' limit before the first valid token).
        nghttp2_option_set_peer_max_concurrent_streams(option, 1)
        var session: OpaquePointer?
        // Unretained: this object outlives the session (the thread body holds it until teardown deletes the session).
        let rc = nghttp2_session_client_new2(&session, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        guard rc == 0, let session else {
            throw APNsClientError(transport: .connectFailed, "nghttp2_session_client_new2: \(Self.describe(rc))")
        }
        self.session = session
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        flush()
    }

    static func wait(fd: Int32, events: Int16, until deadline: ContinuousClock.Instant) -> Bool {
        while true {
            let left = (deadline - .now).milliseconds
            if left <= 0 { return false }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let rc = poll(&p, 1, Int32(min(left, 1000)))
            if rc > 0 { return true }
            if rc < 0 && errno != EINTR { return false }
        }
    }

    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
