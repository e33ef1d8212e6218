import APNsCore
import NIOCore
import NIOHPACK
import NIOHTTP2

/// The frames of an APNs answer to one `/3/device/` request (apns-reference.md §6): `:status`, `apns-id`
/// (echoed or generated), `apns-unique-id` in the development environment, and for errors a JSON body
/// `{"reason": …}` with `timestamp` (milliseconds) on 410.
enum APNsAnswer {
    /// 200: one HEADERS frame that ends the stream.
    static func accepted(_ streamID: HTTP2StreamID, apnsID: String, uniqueID: String?) -> HTTP2Frame {
        var headers = HPACKHeaders()
        headers.reserveCapacity(3)
        headers.add(name: ":status", value: "200")
        addIDs(to: &headers, apnsID: apnsID, uniqueID: uniqueID)
        return HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))
    }

    /// An error: HEADERS, then DATA with the JSON body that ends the stream.
    static func rejected(
        _ streamID: HTTP2StreamID,
        status: Int,
        reason: APNsReason,
        timestampMilliseconds: Int64?,
        apnsID: String,
        uniqueID: String?,
        allocator: ByteBufferAllocator
    ) -> (headers: HTTP2Frame, body: HTTP2Frame) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(4)
        headers.add(name: ":status", value: String(status))
        addIDs(to: &headers, apnsID: apnsID, uniqueID: uniqueID)
        headers.add(name: "content-type", value: "application/json")
        var body = "{\"reason\":\"\(reason.rawValue)\""
        if let timestampMilliseconds { body += ",\"timestamp\":\(timestampMilliseconds)" }
        body += "}"
        return (
            HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: false))),
            HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(allocator.buffer(string: body)), endStream: true)))
        )
    }

    private static func addIDs(to headers: inout HPACKHeaders, apnsID: String, uniqueID: String?) {
        headers.add(name: "apns-id", value: apnsID, indexing: .nonIndexable)
        if let uniqueID { headers.add(name: "apns-unique-id", value: uniqueID, indexing: .nonIndexable) }
    }
}
