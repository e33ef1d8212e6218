import APNsCore
import CNGHTTP2

/// A request's headers flattened into one byte buffer, ready to become an `nghttp2_nv` array on the I/O
/// thread. Built on the caller's task so the I/O thread only points into it.
///
/// HPACK (apns-reference.md §2): `:path` and `authorization` are never indexed (they change per request or
/// per token and would evict useful entries from APNs' small table); per-request values (`apns-id`,
/// `apns-expiration`, `apns-collapse-id`) are also sent without indexing, which is what the guidance amounts
/// to after their first use; stable headers are indexed incrementally.
struct PreparedRequest: Sendable {
    struct Field: Sendable {
        var nameStart: Int32, nameLength: Int32, valueStart: Int32, valueLength: Int32
        var neverIndex: Bool
    }
    var bytes: [UInt8] = []
    var fields: [Field] = []
    var payload: [UInt8]

    private mutating func add(_ name: StaticString, _ value: String, neverIndex: Bool = false) {
        let nameStart = bytes.count
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        let valueStart = bytes.count
        bytes.append(contentsOf: value.utf8)
        fields.append(Field(
            nameStart: Int32(nameStart), nameLength: Int32(valueStart - nameStart),
            valueStart: Int32(valueStart), valueLength: Int32(bytes.count - valueStart), neverIndex: neverIndex
        ))
    }

    init(notification n: APNsNotification, authority: String) {
        payload = n.payload
        bytes.reserveCapacity(160 + n.deviceToken.hex.utf8.count + n.topic.utf8.count)
        add(":method", "POST")
        add(":scheme", "https")
        add(":path", n.path, neverIndex: true)
        add(":authority", authority)
        add("apns-push-type", n.pushType.rawValue)
        add("apns-topic", n.topic)
        if let p = n.priority { add("apns-priority", String(p.rawValue)) }
        if let e = n.expiration { add("apns-expiration", String(e), neverIndex: true) }
        if let c = n.collapseID { add("apns-collapse-id", c, neverIndex: true) }
        if let id = n.apnsID { add("apns-id", id, neverIndex: true) }
    }

    /// Lends an `nghttp2_nv` array over these headers plus `authorization` (never indexed) if given.
    /// The pointers are valid only inside `body`; nghttp2 copies them during `nghttp2_submit_request`.
    func withHeaders<R>(authorization: [UInt8]?, _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        bytes.withUnsafeBufferPointer { raw in
            let base = UnsafeMutablePointer(mutating: raw.baseAddress!)
            let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
            let none = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
            var nva = [nghttp2_nv]()
            nva.reserveCapacity(fields.count + 1)
            for f in fields {
                nva.append(nghttp2_nv(
                    name: base + Int(f.nameStart), value: base + Int(f.valueStart),
                    namelen: Int(f.nameLength), valuelen: Int(f.valueLength), flags: f.neverIndex ? noIndex : none
                ))
            }
            guard let authorization else { return nva.withUnsafeBufferPointer(body) }
            return authorization.withUnsafeBufferPointer { auth in
                Self.authorizationName.withUTF8Buffer { name in
                    nva.append(nghttp2_nv(
                        name: UnsafeMutablePointer(mutating: name.baseAddress!),
                        value: UnsafeMutablePointer(mutating: auth.baseAddress!),
                        namelen: name.count, valuelen: auth.count, flags: noIndex
                    ))
                    return nva.withUnsafeBufferPointer(body)
                }
            }
        }
    }
    private static let authorizationName: StaticString = "authorization"
}
