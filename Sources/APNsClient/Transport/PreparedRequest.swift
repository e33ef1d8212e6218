import APNsCore
import CNGHTTP2

/// A request's headers flattened into one byte buffer, ready to become an `nghttp2_nv` array on the event
/// loop. Built on the caller's thread so the loop only points into it.
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
    var payload: ArraySlice<UInt8>
    /// How much of the response body to keep: a push's answer is a small JSON object; a channel list can be
    /// large (10,000 ids). Beyond this the body is cut, to keep memory bounded.
    var maxResponseBody = 4096
    /// Whether the response carries the body (channel management); pushes keep only the parsed reason.
    var keepsResponseBody = false
    /// Its place among requests waiting for a connection: by lane and apns-priority, then its app's turn;
    /// its lane is also what it counts against in the pool (bulk's cap).
    var waitClass = WaitClass.default

    private mutating func add(_ name: StaticString, _ value: String, neverIndex: Bool = false) {
        name.withUTF8Buffer { add(name: $0, value, neverIndex: neverIndex) }
    }

    private mutating func add(_ name: StaticString, prefix: StaticString, _ value: String, neverIndex: Bool) {
        let nameStart = bytes.count
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        let valueStart = bytes.count
        prefix.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: value.utf8)
        fields.append(Field(
            nameStart: Int32(nameStart), nameLength: Int32(valueStart - nameStart),
            valueStart: Int32(valueStart), valueLength: Int32(bytes.count - valueStart), neverIndex: neverIndex
        ))
    }

    private mutating func add(name: some Collection<UInt8>, _ value: String, neverIndex: Bool) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name)
        let valueStart = bytes.count
        bytes.append(contentsOf: value.utf8)
        fields.append(Field(
            nameStart: Int32(nameStart), nameLength: Int32(valueStart - nameStart),
            valueStart: Int32(valueStart), valueLength: Int32(bytes.count - valueStart), neverIndex: neverIndex
        ))
    }

    /// A device push (`/3/device/<token>`, `apns-topic`, `apns-id`) or a broadcast
    /// (`/4/broadcasts/apps/<bundle id>`, `apns-channel-id`, `apns-request-id`; apns-reference.md §10).
    /// A channel id is indexed: broadcasts repeat the few channels of an app.
    init(notification n: APNsNotification, authority: String) {
        payload = n.payload
        waitClass = WaitClass(n)
        // Room for every header at once (no regrowth): the fixed names and values, the path, the topic or
        // channel, and the ids.
        var variable = n.topic.utf8.count + (n.apnsID?.utf8.count ?? 0) + (n.collapseID?.utf8.count ?? 0)
        switch n.target {
        case .device(let token): variable += token.hex.utf8.count
        case .channel(let channel): variable += channel.base64.utf8.count
        }
        bytes.reserveCapacity(256 + variable)
        fields.reserveCapacity(10)
        add(":method", "POST")
        add(":scheme", "https")
        switch n.target {  // n.path, written without building the String first
        case .device(let token): add(":path", prefix: "/3/device/", token.hex, neverIndex: true)
        case .channel: add(":path", prefix: "/4/broadcasts/apps/", n.topic, neverIndex: true)
        }
        add(":authority", authority)
        add("apns-push-type", n.pushType.rawValue)
        switch n.target {
        case .device:
            add("apns-topic", n.topic)
        case .channel(let channel):
            add("apns-channel-id", channel.base64)
        }
        if let p = n.priority { add("apns-priority", String(p.rawValue)) }
        if let e = n.expiration { add("apns-expiration", String(e), neverIndex: true) }
        if n.isBroadcast {
            if let id = n.apnsID { add("apns-request-id", id, neverIndex: true) }
        } else {
            if let c = n.collapseID { add("apns-collapse-id", c, neverIndex: true) }
            if let id = n.apnsID { add("apns-id", id, neverIndex: true) }
        }
    }

    /// Any other request to an APNs host (channel management): its response keeps its body.
    init(method: String, path: String, authority: String, headers: [(name: String, value: String)], body: [UInt8], maxResponseBody: Int) {
        payload = body[...]
        add(":method", method)
        add(":scheme", "https")
        add(":path", path, neverIndex: true)
        add(":authority", authority)
        for (name, value) in headers { add(name: name.utf8, value, neverIndex: true) }
        self.maxResponseBody = maxResponseBody
        keepsResponseBody = true
    }

    /// Whether the request has a body: a GET or DELETE has none (END_STREAM on its HEADERS).
    var hasBody: Bool { !payload.isEmpty }

    /// Lends an `nghttp2_nv` array over these headers plus `authorization` (never indexed) if given.
    /// The pointers are valid only inside `body`; nghttp2 copies them during `nghttp2_submit_request`.
    func withHeaders<R>(authorization: [UInt8]?, _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        var nva = [nghttp2_nv]()
        return withHeaders(authorization: authorization, scratch: &nva, body)
    }

    /// As `withHeaders(authorization:_:)`, building the array in `scratch` (a connection reuses one: no
    /// allocation per request).
    func withHeaders<R>(authorization: [UInt8]?, scratch nva: inout [nghttp2_nv], _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        bytes.withUnsafeBufferPointer { raw in
            let base = UnsafeMutablePointer(mutating: raw.baseAddress!)
            let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
            let none = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
            nva.removeAll(keepingCapacity: true)
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
