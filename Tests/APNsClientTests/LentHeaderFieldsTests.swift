import CNGHTTP2
import Testing

/// A request's header fields are lent to nghttp2 (`PreparedRequest.withHeaders`: `NO_COPY_NAME`, `NO_COPY_VALUE`),
/// and the connection gives a request's buffer back as soon as it resets the request's stream (`expire`). That rests
/// on one behaviour of the nghttp2 the relay links: a reset of a client stream whose HEADERS still waits to be sent
/// cancels that HEADERS before nghttp2 reads its fields. Checked here on a bare client session, with the lent buffer
/// overwritten between the reset and the send.
@Suite struct LentHeaderFieldsTests {
    @Test func aResetCancelsAWaitingHeadersWithoutReadingItsFields() throws {
        let frames = try Self.framesSent(resetBeforeSending: true)
        #expect(!frames.contains { $0.type == UInt8(NGHTTP2_HEADERS.rawValue) }, "the cancelled HEADERS went out: \(frames)")
        #expect(frames.notSentHeaders == [1], "nghttp2 reports the HEADERS of stream 1 not sent")
    }

    /// The counterpart: without the reset the HEADERS goes out, so the check above can fail.
    @Test func withoutTheResetTheHeadersGoesOut() throws {
        let frames = try Self.framesSent(resetBeforeSending: false)
        #expect(frames.contains { $0.type == UInt8(NGHTTP2_HEADERS.rawValue) && $0.streamID == 1 })
        #expect(frames.notSentHeaders.isEmpty)
    }

    struct Frame: CustomStringConvertible {
        var type: UInt8
        var streamID: Int32
        var description: String { "type \(type) stream \(streamID)" }
    }

    struct Sent: Sequence {
        var frames: [Frame]
        var notSentHeaders: [Int32]
        func makeIterator() -> IndexingIterator<[Frame]> { frames.makeIterator() }
    }

    /// Submits one GET whose fields are lent from a buffer, optionally resets its stream, overwrites the buffer, then
    /// lets nghttp2 write everything it has: the frames it wrote, and the streams whose HEADERS it reported not sent.
    static func framesSent(resetBeforeSending reset: Bool) throws -> Sent {
        var callbacks: OpaquePointer?
        try #require(nghttp2_session_callbacks_new(&callbacks) == 0)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, _, userData in
            if let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) {
                userData!.assumingMemoryBound(to: [Int32].self).pointee.append(frame.pointee.hd.stream_id)
            }
            return 0
        }
        let notSent = UnsafeMutablePointer<[Int32]>.allocate(capacity: 1)
        notSent.initialize(to: [])
        defer { notSent.deinitialize(count: 1).deallocate() }
        var session: OpaquePointer?
        try #require(nghttp2_session_client_new(&session, callbacks, notSent) == 0)
        defer { nghttp2_session_del(session) }

        let fields: [(String, String)] = [(":method", "GET"), (":scheme", "https"), (":path", "/1/apps/com.example/all-channels"), (":authority", "api.push.apple.com")]
        let text = fields.flatMap { Array($0.0.utf8) + Array($0.1.utf8) }
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: text.count)
        defer { buffer.deallocate() }
        _ = buffer.initialize(from: text)
        var nva: [nghttp2_nv] = []
        var offset = 0
        for (name, value) in fields {
            let nameCount = name.utf8.count, valueCount = value.utf8.count
            nva.append(nghttp2_nv(
                name: buffer.baseAddress! + offset, value: buffer.baseAddress! + offset + nameCount, namelen: nameCount, valuelen: valueCount,
                flags: UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)))
            offset += nameCount + valueCount
        }
        let streamID = nghttp2_submit_request(session, nil, nva, nva.count, nil, nil)
        try #require(streamID == 1)
        if reset { try #require(nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue) == 0) }
        // The buffer is given back and reused: nothing nghttp2 sends may come from it any more.
        buffer.update(repeating: 0xFF)

        var output: [UInt8] = []
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            try #require(count >= 0, "nghttp2_session_mem_send: \(count)")
            if count == 0 { break }
            output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        }
        // The client preface, then frames: a 9-byte header each (length 3, type 1, flags 1, stream id 4).
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        try #require(Array(output.prefix(preface.count)) == preface)
        var frames: [Frame] = []
        var index = preface.count
        while index + 9 <= output.count {
            let length = Int(output[index]) << 16 | Int(output[index + 1]) << 8 | Int(output[index + 2])
            let id = Int32(output[index + 5] & 0x7F) << 24 | Int32(output[index + 6]) << 16 | Int32(output[index + 7]) << 8 | Int32(output[index + 8])
            frames.append(Frame(type: output[index + 3], streamID: id))
            index += 9 + length
        }
        try #require(index == output.count, "the output ends with a whole frame")
        return Sent(frames: frames, notSentHeaders: notSent.pointee)
    }
}
