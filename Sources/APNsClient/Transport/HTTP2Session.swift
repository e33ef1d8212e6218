import CNGHTTP2
import CNGHTTP2Memory

/// Owns one connection's `nghttp2_session` (client side) and its callbacks.
///
/// nghttp2 does the framing, HPACK and flow control; it never touches the socket: bytes come in through
/// `receive` and go out through `send(into:)`. Its callbacks run inside those two calls and report to the
/// connection (`ConnectionIO`), on the connection's event loop. Not thread-safe: used by that loop only.
final class HTTP2Session {
    private let session: OpaquePointer
    /// The session's memory (`cnghttp2_pool`): the streams, frames and header buffers nghttp2 allocates for
    /// every request come back from its free lists, not from malloc. Deleted after the session.
    private let memory: OpaquePointer
    /// The free blocks a session's pool keeps: enough for the few thousand blocks of ~1000 streams in flight
    /// (a stream, its outbound frames, its copied request headers and the response's header buffers; most
    /// under 512 bytes); beyond that a freed block goes back to malloc.
    static let cachedBytesPerSession = 1 << 20
    /// Reused for every request's header array.
    private var nva: [nghttp2_nv] = []

    /// - Parameter connection: receives the callbacks' events. Unretained in nghttp2's `user_data`: the
    ///   connection owns this session, so it outlives every callback.
    init(connection: ConnectionIO) throws(APNsClientError) {
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
        guard let memory = cnghttp2_pool_new(Self.cachedBytesPerSession) else {
            throw APNsClientError(transport: .connectFailed, "out of memory for an HTTP/2 session")
        }
        // nghttp2 copies the struct; the pool itself lives until deinit.
        var allocator = nghttp2_mem(
            mem_user_data: UnsafeMutableRawPointer(memory), malloc: cnghttp2_pool_malloc, free: cnghttp2_pool_free,
            calloc: cnghttp2_pool_calloc, realloc: cnghttp2_pool_realloc)
        var session: OpaquePointer?
        let rc = nghttp2_session_client_new3(&session, callbacks, Unmanaged.passUnretained(connection).toOpaque(), option, &allocator)
        guard rc == 0, let session else {
            cnghttp2_pool_delete(memory)
            throw APNsClientError(transport: .connectFailed, "nghttp2_session_client_new3: \(Self.describe(rc))")
        }
        self.session = session
        self.memory = memory
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
    }

    deinit {
        nghttp2_session_del(session)
        assert(memoryStatistics.outstanding == 0, "nghttp2 kept \(memoryStatistics.outstanding) blocks past its session")
        cnghttp2_pool_delete(memory)
    }

    /// What the session's pool has served, and how much of it malloc had to provide.
    var memoryStatistics: cnghttp2_pool_stats {
        var statistics = cnghttp2_pool_stats()
        cnghttp2_pool_get_stats(memory, &statistics)
        return statistics
    }

    /// Feeds received bytes to nghttp2 (its callbacks run now). - Returns: an error message, or `nil`.
    func receive(_ bytes: UnsafeRawBufferPointer) -> String? {
        let rv = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        return rv < 0 ? "HTTP/2 protocol error: \(Self.describe(Int32(rv)))" : nil
    }

    /// Moves nghttp2's pending frames into `socket`'s output until it holds `limit` bytes (memory stays
    /// bounded on a slow peer; the rest waits in nghttp2). - Returns: an error message, or `nil`.
    func send(into socket: TLSSocket, limit: Int) -> String? {
        while socket.unwritten < limit {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 { return "nghttp2_session_mem_send: \(Self.describe(Int32(n)))" }
            if n == 0 { return nil }
            socket.enqueue(UnsafeBufferPointer(start: data, count: n))
        }
        return nil
    }

    /// Opens a stream for `stream`'s request (headers plus `authorization`, if given; a body through `readPayload`).
    /// - Returns: the stream id, or a negative nghttp2 error.
    func submit(_ stream: StreamRequest, authorization: [UInt8]?) -> Int32 {
        // Read in place through the stream request (a copy of the prepared request would retain each of its
        // buffers); the closure captures the flag, not the request.
        let hasBody = stream.send.request.hasBody
        return stream.send.request.withHeaders(authorization: authorization, scratch: &nva) { [session] nva -> Int32 in
            // A request without a body (a channel-management GET or DELETE) ends with its HEADERS.
            guard hasBody else { return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, nil, nil) }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: NGHTTP2Callbacks.readPayload)
            return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, nil)
        }
    }

    func resetStream(_ streamID: Int32) {
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
    }

    /// - Returns: whether the PING was queued.
    func ping() -> Bool { nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) == 0 }

    /// GOAWAY (NO_ERROR): no new streams; the session ends once its streams have.
    func terminate() { nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue) }

    /// Whether the session still reads or writes (false once GOAWAY was sent or received and every stream ended).
    var isActive: Bool { nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0 }

    /// Whether nghttp2 has frames to send.
    var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS.
    var peerMaxConcurrentStreams: Int {
        Int(min(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 1 << 20))
    }

    /// Connection-level send window left, bytes.
    var sendWindow: Int { Int(nghttp2_session_get_remote_window_size(session)) }

    var nextStreamID: UInt32 { nghttp2_session_get_next_stream_id(session) }

    static func describe(_ code: Int32) -> String { String(cString: nghttp2_strerror(code)) }
}
