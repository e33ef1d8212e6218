import APNsCore
import CNGHTTP2

// MARK: - nghttp2 events: called from the C callbacks (ConnectionIO+Callbacks.swift), on the I/O thread.

extension ConnectionIO {
    func settingsChanged() {
        maxConcurrent = Int(min(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 1 << 20))
        guard !settingsReceived else { return }
        settingsReceived = true
        connection.shared.withLock { $0.load.phase = .ready; $0.load.maxConcurrentStreams = maxConcurrent }
        ready?.resume()
        ready = nil
        onEvent(.ready)
    }

    func goawayReceived(lastStreamID: Int32, errorCode: UInt32, debug: String) {
        goawayLastStreamID = lastStreamID
        connection.shared.withLock { $0.load.phase = .draining }
        logger.notice("GOAWAY received", metadata: ["last-stream-id": "\(lastStreamID)", "error-code": "\(errorCode)", "debug": "\(debug)"])
        failQueued(.notProcessed, "connection received GOAWAY")
        onEvent(.goaway(lastStreamID: lastStreamID, errorCode: errorCode, debug: debug))
    }

    func header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let r = streams[streamID] else { return }
        if name.elementsEqual(":status".utf8) {
            var status = 0
            for b in value where b >= 0x30 && b <= 0x39 { status = status * 10 + Int(b - 0x30) }
            r.status = status
        } else if name.elementsEqual("apns-id".utf8) || name.elementsEqual("apns-request-id".utf8) {
            r.apnsID = String(decoding: value, as: UTF8.self)
        } else if name.elementsEqual("apns-unique-id".utf8) {
            r.apnsUniqueID = String(decoding: value, as: UTF8.self)
        } else if name.elementsEqual("apns-channel-id".utf8) {
            r.channelID = String(decoding: value, as: UTF8.self)
        }
    }

    func data(streamID: Int32, _ chunk: UnsafeBufferPointer<UInt8>) {
        guard let r = streams[streamID] else { return }
        let room = r.prepared.maxResponseBody - r.body.count
        if room > 0 { r.body.append(contentsOf: chunk.prefix(room)) }
    }

    func streamClosed(streamID: Int32, errorCode: UInt32) {
        guard let r = streams.removeValue(forKey: streamID) else { return }
        if let last = goawayLastStreamID, streamID > last {
            finish(r, .failure(APNsClientError(transport: .notProcessed, "stream above GOAWAY last-stream-id \(last)")))
        } else if let status = r.status {
            let (reason, timestamp) = ResponseBody.parse(r.body)
            var response = APNsResponse(status: status, apnsID: r.apnsID, apnsUniqueID: r.apnsUniqueID, reason: reason, timestamp: timestamp)
            response.channelID = r.channelID
            if r.prepared.keepsResponseBody { response.body = r.body }
            finish(r, .success(response))
        } else if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            finish(r, .failure(APNsClientError(transport: .streamRefused, "RST_STREAM REFUSED_STREAM", underlyingCode: Int(errorCode))))
        } else {
            finish(r, .failure(APNsClientError(transport: .connectionLost, "stream closed without a response (HTTP/2 error \(errorCode))", underlyingCode: Int(errorCode))))
        }
    }

    func requestNotSent(streamID: Int32, error: Int32) {
        guard let r = streams.removeValue(forKey: streamID) else { return }
        finish(r, .failure(APNsClientError(transport: .notProcessed, "request not sent: \(Self.describe(error))", underlyingCode: Int(error))))
    }

    func pingAcknowledged() { pingSentAt = nil }

    func payloadChunk(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let r = streams[streamID] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let payload = r.prepared.payload
        let n = min(length, payload.count - r.payloadOffset)
        if n > 0 {
            payload.withUnsafeBufferPointer { src in
                buffer.update(from: src.baseAddress! + r.payloadOffset, count: n)
            }
        }
        r.payloadOffset += n
        if r.payloadOffset == payload.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    }

    static func describe(_ code: Int32) -> String { String(cString: nghttp2_strerror(code)) }
}
