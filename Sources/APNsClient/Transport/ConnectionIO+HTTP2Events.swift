import APNsCore
import CNGHTTP2

// MARK: - nghttp2 events (the extension reaches the connection's state: its members are internal, not private): from the C callbacks (HTTP2Session+Callbacks.swift), inside `receive` / `send`.

extension ConnectionIO {
    func settingsChanged() {
        let first = table.settingsReceived(maxConcurrentStreams: session.peerMaxConcurrentStreams)
        guard first else { return }
        connection.becameReady(maxConcurrentStreams: table.maxConcurrentStreams)
        if let onReady {
            self.onReady = nil
            core.afterCompletions { onReady(.success(())) }
        }
    }

    func goawayReceived(lastStreamID: Int32, errorCode: UInt32, debug: String) {
        connection.receivedGoaway()
        logger.notice("GOAWAY received", metadata: ["last-stream-id": "\(lastStreamID)", "error-code": "\(errorCode)", "debug": "\(debug)"])
        for (request, failure) in table.goawayReceived(lastStreamID: lastStreamID) { finish(request, failure) }
        let onEvent = self.onEvent
        core.afterCompletions { onEvent(.goaway(lastStreamID: lastStreamID, errorCode: errorCode, debug: debug)) }
    }

    /// Runs `body` with the request on `streamID`, if it is open. The stream being read (`current`) is lent
    /// without a retain: nghttp2 calls back for each of its headers and data chunks.
    private func withRequest<R>(onStream streamID: Int32, _ body: (StreamRequest) -> R) -> R? {
        if let current, current.streamID == streamID { return current.request._withUnsafeGuaranteedRef(body) }
        guard let request = table.request(onStream: streamID) else { return nil }
        current = (streamID, Unmanaged.passUnretained(request))
        return body(request)
    }

    func header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        withRequest(onStream: streamID) { $0.head.read(name: name, value: value) }
    }

    func data(streamID: Int32, _ chunk: UnsafeBufferPointer<UInt8>) {
        withRequest(onStream: streamID) { r in
            let room = r.send.request.maxResponseBody - r.body.count
            if room > 0 { r.body.append(contentsOf: chunk.prefix(room)) }
        }
    }

    func streamClosed(streamID: Int32, errorCode: UInt32) {
        if current?.streamID == streamID { current = nil }
        guard let (r, notProcessed) = table.closed(streamID: streamID) else { return }
        if notProcessed {
            finish(r, .init(transport: .notProcessed, message: "stream above GOAWAY last-stream-id"))
        } else if var response = r.head.response(body: r.body, keepsBody: r.send.request.keepsResponseBody) {
            response.connectionID = connection.id
            finish(r, .success(response))
        } else if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            finish(r, .init(transport: .streamRefused, message: "RST_STREAM REFUSED_STREAM"), code: Int(errorCode))
        } else {
            finish(r, .init(transport: .connectionLost, message: "stream closed without a response (HTTP/2 error \(errorCode))"), code: Int(errorCode))
        }
    }

    func requestNotSent(streamID: Int32, error: Int32) {
        if current?.streamID == streamID { current = nil }
        guard let (r, _) = table.closed(streamID: streamID) else { return }
        finish(r, .init(transport: .notProcessed, message: "request not sent: \(HTTP2Session.describe(error))"), code: Int(error))
    }

    func pingAcknowledged() { keepalive.pingSentAt = nil }

    func payloadChunk(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        withRequest(onStream: streamID) { r in
            // Read in place: a copy of the payload would retain its buffer.
            r.send.request.payload.withUnsafeBufferPointer { payload in
                let n = min(length, payload.count - r.payloadOffset)
                if n > 0 { buffer.update(from: payload.baseAddress! + r.payloadOffset, count: n) }
                r.payloadOffset += n
                if r.payloadOffset == payload.count {
                    flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                    // The turn's clock, read at its start: a request handed over during the turn was taken later.
                    r.sentAt = max(core.now, r.enqueuedAt)
                }
                return n
            }
        } ?? Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
}
