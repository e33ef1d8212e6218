import APNsCore
import CNGHTTP2
import COpenSSL
import DequeModule
import Glibc
import Logging
import ServiceSupport

/// The I/O side of an `APNsConnection`: socket, TLS session and nghttp2 session, all owned by one thread.
///
/// Everything here runs on the connection's I/O thread; nghttp2 callbacks (which run inside `mem_recv` /
/// `mem_send` on that thread) only record state and complete requests. Talks to senders only through
/// `connection.shared` (a lock) and the eventfd.
final class ConnectionIO {
    let connection: APNsConnection
    let tls: TLSContext
    let token: TokenSource?
    let onEvent: @Sendable (ConnectionEvent) -> Void
    var ready: CheckedContinuation<Void, any Error>?
    var logger: Logger { connection.logger }

    var fd: Int32 = -1
    var ssl: OpaquePointer?
    var session: OpaquePointer?

    var streams: [Int32: StreamRequest] = [:]
    /// Requests waiting for a stream (MAX_CONCURRENT_STREAMS reached), in arrival order.
    var queue = Deque<StreamRequest>()
    var outbuf: [UInt8] = []
    var outPos = 0
    var writeBlocked = false
    var readMore = false
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    var settingsReceived = false
    var maxConcurrent = 1
    var goawayLastStreamID: Int32?
    var terminated = false
    /// Retired because its stream ids are used up (`APNsConnectionConfiguration.maxStreamID`).
    var streamIDsUsedUp = false
    var fatal: (TransportFailure, String)?

    var currentToken: ProviderToken?
    var tokenAdoptedAt: Int64 = 0
    var lastTokenCheck: Int64 = .min
    var authorization: [UInt8]?

    var lastReceive = ContinuousClock.now
    var pingSentAt: ContinuousClock.Instant?
    var nextDeadlineScan = ContinuousClock.Instant.now.advanced(by: .seconds(3600))
    var completedSincePublish = 0
    var timeoutsSincePublish = 0
    var latencyEWMA: Double = 0

    init(connection: APNsConnection, tls: TLSContext, token: TokenSource?,
         onEvent: @escaping @Sendable (ConnectionEvent) -> Void, ready: CheckedContinuation<Void, any Error>) {
        self.connection = connection
        self.tls = tls
        self.token = token
        self.onEvent = onEvent
        self.ready = ready
    }

    deinit { readBuffer.deallocate() }

    // MARK: - Thread body

    /// The thread's body. Whoever waits for it (a connect, the pool's shutdown) hears of its end only after
    /// the thread is done with OpenSSL, its own per-thread state included: a process exits once the pool
    /// says every connection is closed, and OpenSSL's exit-time clean-up racing a thread that still freed its
    /// SSL objects crashed a test tool with "double free or corruption".
    func run(liveThreads: ThreadCount) {
        let connectDeadline = ContinuousClock.now.advanced(by: connection.configuration.connectTimeout)
        var connectError: (any Error)?
        do {
            if let proxy = connection.configuration.proxy {
                try openSocket(host: proxy.host, port: proxy.port, deadline: connectDeadline, what: "proxy")
                try openTunnel(through: proxy, deadline: connectDeadline)
            } else {
                try openSocket(host: connection.configuration.host, port: connection.configuration.port, deadline: connectDeadline, what: nil)
            }
            try handshake(deadline: connectDeadline)
            try startSession()
            loop(connectDeadline: connectDeadline)
        } catch {
            connectError = error
        }
        let (notify, message) = teardown()
        OPENSSL_thread_stop()
        liveThreads.value.subtract(1, ordering: .releasing)
        if let ready {
            self.ready = nil
            ready.resume(throwing: connectError ?? APNsClientError(transport: .connectFailed, message))
        }
        // Only connections that became ready were handed to the owner; a failed connect reports through
        // `connect` throwing, and a `.closed` as well would make the pool reconnect twice (without backoff).
        if notify { onEvent(.closed) }
    }

    private func loop(connectDeadline: ContinuousClock.Instant) {
        while true {
            let now = ContinuousClock.now
            if !settingsReceived && now >= connectDeadline {
                fatal = (.connectFailed, "no SETTINGS from the server before the connect timeout")
            }
            if fatal != nil { break }
            let (incoming, drain, cancellations) = connection.shared.withLock { s -> ([StreamRequest], Bool, Bool) in
                let taken = s.inbox
                s.inbox.removeAll(keepingCapacity: true)
                defer { s.cancellationsPending = false }
                return (taken, s.drainRequested, s.cancellationsPending)
            }
            for r in incoming {
                queue.append(r)
                if r.deadline < nextDeadlineScan { nextDeadlineScan = r.deadline }
            }
            if goawayLastStreamID != nil { failQueued(.notProcessed, "connection received GOAWAY") }
            if now >= nextDeadlineScan || cancellations { expireDeadlines(now: now) }
            submitQueued()
            keepalive(now: now)
            if drain && streams.isEmpty && queue.isEmpty && !terminated {
                nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
                terminated = true
            }
            flush()
            if fatal != nil { break }
            if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 && outPos == outbuf.count {
                break  // GOAWAY sent or received and every stream finished.
            }
            publish()
            waitForIO(now: now, connectDeadline: connectDeadline)
            if fatal != nil { break }
        }
    }

    private func waitForIO(now: ContinuousClock.Instant, connectDeadline: ContinuousClock.Instant) {
        var until = now.advanced(by: .seconds(1))
        if nextDeadlineScan < until { until = nextDeadlineScan }
        if !settingsReceived && connectDeadline < until { until = connectDeadline }
        if let sent = pingSentAt, sent.advanced(by: connection.configuration.pingTimeout) < until {
            until = sent.advanced(by: connection.configuration.pingTimeout)
        }
        var timeoutMS = Int32(max(0, min(1000, (until - now).milliseconds + 1)))
        if readMore { timeoutMS = 0 }
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN) | (outPos < outbuf.count ? Int16(POLLOUT) : 0), revents: 0),
            pollfd(fd: connection.wakeFD, events: Int16(POLLIN), revents: 0),
        ]
        let rc = poll(&fds, 2, timeoutMS)
        if rc < 0 {
            if errno == EINTR { return }
            fatal = (.connectionLost, "poll failed: errno \(errno)")
            return
        }
        if fds[1].revents != 0 {
            var value: UInt64 = 0
            _ = read(connection.wakeFD, &value, 8)
        }
        if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 || readMore {
            readSocket()
        }
    }

    // MARK: - Requests

    private func submitQueued() {
        guard settingsReceived, goawayLastStreamID == nil, !terminated else { return }
        if streamIDsUsedUp {
            failQueued(.notProcessed, "connection used up its stream ids")
            return
        }
        if token != nil && !queue.isEmpty { refreshToken() }
        while !queue.isEmpty && streams.count < maxConcurrent {
            if nghttp2_session_get_next_stream_id(session) > UInt32(connection.configuration.maxStreamID) {
                retireForStreamIDs()
                return
            }
            let r = queue.removeFirst()
            if r.isCompleted { continue }
            let streamID = r.prepared.withHeaders(authorization: authorization) { nva -> Int32 in
                // A request without a body (a channel-management GET or DELETE) ends with its HEADERS.
                guard r.prepared.hasBody else { return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, nil, nil) }
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: NGHTTP2Callbacks.readPayload)
                return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, nil)
            }
            guard streamID > 0 else {
                finish(r, .failure(APNsClientError(transport: .notProcessed, "nghttp2_submit_request: \(Self.describe(streamID))", underlyingCode: Int(streamID))))
                if streamID == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue {
                    retireForStreamIDs()
                    return
                }
                continue
            }
            r.streamID = streamID
            streams[streamID] = r
        }
    }

    func failQueued(_ failure: TransportFailure, _ message: String) {
        while let r = queue.popFirst() {
            finish(r, .failure(APNsClientError(transport: failure, message)))
        }
    }

    func finish(_ r: StreamRequest, _ result: Result<APNsResponse, APNsClientError>) {
        guard !r.isCompleted else { return }
        if case .success = result {
            let seconds = (ContinuousClock.now - r.enqueuedAt).seconds
            latencyEWMA = latencyEWMA == 0 ? seconds : latencyEWMA * 0.9 + seconds * 0.1
        }
        completedSincePublish += 1
        r.complete(result)
    }

    private func publish() {
        let window = Int(nghttp2_session_get_remote_window_size(session))
        let completed = completedSincePublish
        let timeouts = timeoutsSincePublish
        completedSincePublish = 0
        timeoutsSincePublish = 0
        let latency = latencyEWMA
        let maxStreams = maxConcurrent
        connection.shared.withLock { s in
            s.load.outstanding -= completed
            s.load.completed += completed
            s.load.timeouts += timeouts
            s.load.sendWindow = window
            s.load.latency = latency
            s.load.maxConcurrentStreams = maxStreams
        }
    }

    // MARK: - Socket and TLS

    private func readSocket() {
        readMore = false
        for _ in 0..<32 {
            ERR_clear_error()
            let n = SSL_read(ssl, readBuffer.baseAddress, Int32(readBuffer.count))
            if n > 0 {
                lastReceive = .now
                let rv = nghttp2_session_mem_recv(session, readBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int(n))
                if rv < 0 {
                    fatal = (.connectionLost, "HTTP/2 protocol error: \(Self.describe(Int32(rv)))")
                    return
                }
                continue
            }
            let error = SSL_get_error(ssl, n)
            switch error {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return
            case SSL_ERROR_ZERO_RETURN:
                fatal = (.connectionLost, "server closed the TLS session")
            default:
                let sslError = ERR_get_error()  // read now: it is thread-local state of this failed call.
                fatal = (.connectionLost, "TLS read failed (SSL error \(error), errno \(errno), OpenSSL \(sslError))")
            }
            return
        }
        readMore = true  // more may be buffered inside OpenSSL; come back without waiting.
    }

    func flush() {
        let cap = connection.configuration.maxOutputBufferBytes
        while outbuf.count - outPos < cap {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 {
                fatal = (.connectionLost, "nghttp2_session_mem_send: \(Self.describe(Int32(n)))")
                return
            }
            if n == 0 { break }
            outbuf.append(contentsOf: UnsafeBufferPointer(start: data, count: n))
        }
        guard outPos < outbuf.count else { return }
        // One SSL_write for everything pending: the big win over writing frame by frame.
        ERR_clear_error()
        let remaining = outbuf.count - outPos
        let n = outbuf.withUnsafeBytes { SSL_write(ssl, $0.baseAddress! + outPos, Int32(min(remaining, Int(Int32.max)))) }
        if n > 0 {
            outPos += Int(n)
            writeBlocked = false
            if outPos == outbuf.count {
                outbuf.removeAll(keepingCapacity: true)
                outPos = 0
            } else if outPos > 64 * 1024 && outPos * 2 > outbuf.count {
                outbuf.removeFirst(outPos)
                outPos = 0
            }
            return
        }
        let error = SSL_get_error(ssl, n)
        switch error {
        case SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_READ:
            writeBlocked = true
        default:
            let sslError = ERR_get_error()
            fatal = (.connectionLost, "TLS write failed (SSL error \(error), errno \(errno), OpenSSL \(sslError))")
        }
    }

    /// Fails what is left, frees the sessions and the socket.
    /// - Returns: whether the owner must hear `.closed`, and why the connection ended.
    private func teardown() -> (notifyClosed: Bool, message: String) {
        let leftovers = connection.shared.withLock { s -> [StreamRequest] in
            s.load.phase = .closed
            let taken = s.inbox
            s.inbox.removeAll()
            s.load.outstanding = 0
            return taken
        }
        let (failure, message) = fatal ?? (.connectionLost, "connection closed")
        for r in leftovers { r.fail(.notProcessed, "connection closed before the request was sent") }
        failQueued(.notProcessed, "connection closed before the request was sent")
        let inFlight = streams
        streams.removeAll()
        for (id, r) in inFlight {
            if let last = goawayLastStreamID, id > last {
                finish(r, .failure(APNsClientError(transport: .notProcessed, "stream above GOAWAY last-stream-id")))
            } else {
                finish(r, .failure(APNsClientError(transport: failure == .connectFailed ? .connectionLost : failure, message)))
            }
        }
        if let session { nghttp2_session_del(session) }
        session = nil
        if let ssl {
            // Best effort close_notify, on a clean close of an established session only: after a failed
            // handshake the peer has usually gone, and the write would only meet a reset socket.
            if fatal == nil, settingsReceived, SSL_is_init_finished(ssl) == 1 { SSL_shutdown(ssl) }
            SSL_free(ssl)
        }
        ssl = nil
        if fd >= 0 { close(fd) }
        fd = -1
        if fatal != nil { logger.notice("connection closed: \(message)") }
        return (settingsReceived, message)
    }

}
