import CNGHTTP2
import ServiceSupport

/// nghttp2's C callbacks: decode the frame's few fields we need and hand them to the connection, nothing
/// else. `user_data` is the unretained `ConnectionIO` (see `HTTP2Session.init`); they run on its event loop.
enum NGHTTP2Callbacks {
    /// Lends the connection to `body` without a retain and a release (several callbacks run per request): it
    /// is alive throughout, since nghttp2 calls back only from within the connection's own calls into it.
    private static func connection<R>(_ userData: UnsafeMutableRawPointer?, _ body: (ConnectionIO) -> R) -> R {
        Unmanaged<ConnectionIO>.fromOpaque(userData!)._withUnsafeGuaranteedRef(body)
    }

    static let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
        guard let frame else { return 0 }
        let hd = frame.pointee.hd
        switch UInt32(hd.type) {
        case NGHTTP2_SETTINGS.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { connection(userData) { $0.settingsChanged() } }
        case NGHTTP2_GOAWAY.rawValue:
            let g = frame.pointee.goaway
            let debug = g.opaque_data_len > 0 ? String(decoding: UnsafeBufferPointer(start: g.opaque_data, count: g.opaque_data_len), as: UTF8.self) : ""
            connection(userData) { $0.goawayReceived(lastStreamID: g.last_stream_id, errorCode: g.error_code, debug: debug) }
        case NGHTTP2_PING.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 { connection(userData) { $0.pingAcknowledged() } }
        default:
            break  // HEADERS/DATA are handled per header and chunk; others need nothing from us.
        }
        return 0
    }

    static let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
        guard let frame, UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue else { return 0 }
        connection(userData) {
            $0.header(
                streamID: frame.pointee.hd.stream_id,
                name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength)
            )
        }
        return 0
    }

    static let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
        connection(userData) { $0.data(streamID: streamID, UnsafeBufferPointer(start: data, count: length)) }
        return 0
    }

    static let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
        connection(userData) { $0.streamClosed(streamID: streamID, errorCode: errorCode) }
        return 0
    }

    // Reads only the frame's header: a HEADERS not sent may be one whose stream was reset, and its header
    // fields, lent from the request's buffer (`PreparedRequest.withHeaders`), may point into a buffer given back
    // and reused since.
    static let onFrameNotSend: nghttp2_on_frame_not_send_callback = { _, frame, error, userData in
        guard let frame, UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue else { return 0 }
        connection(userData) { $0.requestNotSent(streamID: frame.pointee.hd.stream_id, error: error) }
        return 0
    }

    static let readPayload: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
        connection(userData) { $0.payloadChunk(streamID: streamID, into: buffer!, length: length, flags: flags!) }
    }
}
