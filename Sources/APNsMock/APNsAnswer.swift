import APNsCore
import NIOCore
import NIOHPACK
import NIOHTTP2

/// The header an answer names its request by (apns-reference.md §6, §10).
enum AnswerIDHeader {
    /// `apns-id`: device pushes.
    case apnsID
    /// `apns-request-id`: broadcast sends and channel management.
    case requestID

    var name: String {
        switch self {
        case .apnsID: "apns-id"
        case .requestID: "apns-request-id"
        }
    }
}

/// The id an answer carries: the client's own when it sent a canonical UUID, else one the mock generated.
struct AnswerID {
    var header: AnswerIDHeader
    var value: String
}

/// The frames of an APNs answer: `:status`, the request id (`apns-id` or `apns-request-id`, echoed or
/// generated), `apns-unique-id` where APNs sends one, and for errors a JSON body `{"reason": …}` with
/// `timestamp` (milliseconds) on 410. Channel management adds its own headers and JSON bodies.
enum APNsAnswer {
    /// 200 with an empty body: one HEADERS frame that ends the stream.
    static func accepted(_ streamID: HTTP2StreamID, id: AnswerID, uniqueID: String?) -> HTTP2Frame {
        let headers = headerBlock(status: 200, id: id, uniqueID: uniqueID)
        return HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))
    }

    /// An error: HEADERS, then DATA with the JSON body that ends the stream.
    static func rejected(
        _ streamID: HTTP2StreamID,
        status: Int,
        reason: APNsReason,
        timestampMilliseconds: Int64?,
        id: AnswerID,
        uniqueID: String?,
        allocator: ByteBufferAllocator
    ) -> (headers: HTTP2Frame, body: HTTP2Frame) {
        var body = "{\"reason\":\"\(reason.rawValue)\""
        if let timestampMilliseconds { body += ",\"timestamp\":\(timestampMilliseconds)" }
        body += "}"
        let headers = headerBlock(status: status, id: id, uniqueID: uniqueID, json: true)
        return (
            HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: false))),
            HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(allocator.buffer(string: body)), endStream: true)))
        )
    }

    /// A success with extra headers and, when `jsonBody` is given, a JSON body (channel management: 201 with
    /// `apns-channel-id`, 200 with the channel or the list, 204). The body may be larger than a DATA frame and
    /// than the client's flow-control window: NIOHTTP2Handler buffers DATA, splits it to the window and
    /// MAX_FRAME_SIZE, and sends the rest as the client returns credit. (A connection the mock closes meanwhile —
    /// after GOAWAY, or by fault injection — cuts such a body off.)
    static func succeeded(
        _ streamID: HTTP2StreamID,
        status: Int,
        id: AnswerID,
        extraHeaders: [(String, String)] = [],
        jsonBody: ByteBuffer? = nil
    ) -> [HTTP2Frame] {
        let headers = headerBlock(status: status, id: id, uniqueID: nil, extraHeaders: extraHeaders, json: jsonBody != nil)
        let head = HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: jsonBody == nil)))
        guard let jsonBody else { return [head] }
        return [head, HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(jsonBody), endStream: true)))]
    }

    private static func headerBlock(
        status: Int,
        id: AnswerID,
        uniqueID: String?,
        extraHeaders: [(String, String)] = [],
        json: Bool = false
    ) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(4 + extraHeaders.count)
        headers.add(name: ":status", value: status == 200 ? "200" : String(status))
        headers.add(name: id.header.name, value: id.value, indexing: .nonIndexable)
        if let uniqueID { headers.add(name: "apns-unique-id", value: uniqueID, indexing: .nonIndexable) }
        for (name, value) in extraHeaders { headers.add(name: name, value: value, indexing: .nonIndexable) }
        if json { headers.add(name: "content-type", value: "application/json") }
        return headers
    }
}
