import CNGHTTP2
import ServiceSupport

// MARK: - C callbacks: record and hand over, nothing else. `user_data` is the unretained ConnectionIO.

/// nghttp2's C callbacks; `user_data` is the unretained ConnectionIO (see `startSession`).
enum NGHTTP2Callbacks {
    fileprivate static func io(_ userData: UnsafeMutableRawPointer?) -> ConnectionIO {
        Unmanaged<ConnectionIO>.fromOpaque(userData!).takeUnretainedValue()
    }

    static let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
        guard let frame else { return 0 }
        let hd = frame.pointee.hd
        switch UInt32(hd.type) {
        case NGHTTP2_SETTINGS.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { io(userData).settingsChanged() }
        case NGHTTP2_GOAWAY.rawValue:
            let g = frame.pointee.goaway
            let debug = g.opaque_data_len > 0 ? String(decoding: UnsafeBufferPointer(start: g.opaque_data, count: g.opaque_data_len), as: UTF8.self) : ""
            io(userData).goawayReceived(lastStreamID: g.last_stream_id, errorCode: g.error_code, debug: debug)
        case NGHTTP2_PING.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 { io(userData).pingAcknowledged() }
        default:
            break  // HEADERS/DATA are handled per header and chunk; others need nothing from us.
        }
        return 0
    }

    static let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
        guard let frame, UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue else { return 0 }
        io(userData).header(
            streamID: frame.pointee.hd.stream_id,
            name: UnsafeBufferPointer(start: name, count: nameLength),
            value: UnsafeBufferPointer(start: value, count: valueLength)
        )
        return 0
    }

    static let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
        io(userData).data(streamID: streamID, UnsafeBufferPointer(start: data, count: length))
        return 0
    }

    static let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
        io(userData).streamClosed(streamID: streamID, errorCode: errorCode)
        return 0
    }

    static let onFrameNotSend: nghttp2_on_frame_not_send_callback = { _, frame, error, userData in
        guard let frame, UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue else { return 0 }
        io(userData).requestNotSent(streamID: frame.pointee.hd.stream_id, error: error)
        return 0
    }

    static let readPayload: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
        io(userData).payloadChunk(streamID: streamID, into: buffer!, length: length, flags: flags!)
    }
}

