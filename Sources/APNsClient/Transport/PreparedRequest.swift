import APNsCore
import CNGHTTP2

/// A request's headers flattened into one byte buffer, ready to become an `nghttp2_nv` array on the event
/// loop. Built on the caller's thread so the loop only points into it.
///
/// The buffer starts with the header table (one 16-byte ``Field`` per header, room for every header the
/// request can have) and goes on with the names and values they point at: one allocation for all of it.
///
/// HPACK (apns-reference.md §2): `:path` and `authorization` are never indexed (they change per request or
/// per token and would evict useful entries from APNs' small table); per-request values (`apns-id`,
/// `apns-expiration`, `apns-collapse-id`) are also sent without indexing, which is what the guidance amounts
/// to after their first use; stable headers are indexed incrementally.
struct PreparedRequest: Sendable {
    /// Where one header's name and value are in `bytes`; the top bit of `nameLength` says never-index.
    struct Field {
        var nameStart: UInt32, nameLength: UInt32, valueStart: UInt32, valueLength: UInt32
        static let neverIndexBit: UInt32 = 1 << 31
    }
    /// The header table (`tableCapacity` fields, `fieldCount` of them written), then names and values.
    /// Read by `StreamRequest` to give it back to `ByteBufferPool` when the request is done with.
    private(set) var bytes: [UInt8] = []
    private var fieldCount = 0
    private var tableCapacity = 0
    var payload: ArraySlice<UInt8>
    /// How much of the response body to keep: a push's answer is a small JSON object; a channel list can be
    /// large (10,000 ids). Beyond this the body is cut, to keep memory bounded.
    var maxResponseBody = 4096
    /// Whether the response carries the body (channel management); pushes keep only the parsed reason.
    var keepsResponseBody = false
    /// Its place among requests waiting for a connection: by lane and apns-priority, then its app's turn;
    /// its lane is also what it counts against in the pool (bulk's cap).
    var waitClass = WaitClass.default

    /// Starts the buffer with an empty table for `fields` headers, and room for `text` bytes after it.
    private mutating func reserve(fields: Int, text: Int) {
        tableCapacity = fields
        bytes.reserveCapacity(fields * MemoryLayout<Field>.stride + text)
        bytes.append(contentsOf: repeatElement(0, count: fields * MemoryLayout<Field>.stride))
    }

    private mutating func add(_ name: StaticString, _ value: String, neverIndex: Bool = false) {
        name.withUTF8Buffer { add(name: $0, value, neverIndex: neverIndex) }
    }

    private mutating func add(_ name: StaticString, prefix: StaticString, _ value: String, neverIndex: Bool) {
        let nameStart = bytes.count
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        let valueStart = bytes.count
        prefix.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: value.utf8)
        record(nameStart: nameStart, valueStart: valueStart, neverIndex: neverIndex)
    }

    /// `:path` for a device: the token's hex written straight into the buffer.
    private mutating func add(_ name: StaticString, prefix: StaticString, _ token: DeviceToken, neverIndex: Bool) {
        let nameStart = bytes.count
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        let valueStart = bytes.count
        prefix.withUTF8Buffer { bytes.append(contentsOf: $0) }
        token.appendHex(to: &bytes)
        record(nameStart: nameStart, valueStart: valueStart, neverIndex: neverIndex)
    }

    private mutating func add(name: some Collection<UInt8>, _ value: String, neverIndex: Bool) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name)
        let valueStart = bytes.count
        bytes.append(contentsOf: value.utf8)
        record(nameStart: nameStart, valueStart: valueStart, neverIndex: neverIndex)
    }

    /// Writes the table entry of the header just appended (its value ends where `bytes` ends).
    private mutating func record(nameStart: Int, valueStart: Int, neverIndex: Bool) {
        precondition(fieldCount < tableCapacity, "PreparedRequest: more headers than its table has room for")
        let field = Field(
            nameStart: UInt32(nameStart), nameLength: UInt32(valueStart - nameStart) | (neverIndex ? Field.neverIndexBit : 0),
            valueStart: UInt32(valueStart), valueLength: UInt32(bytes.count - valueStart))
        let offset = fieldCount * MemoryLayout<Field>.stride
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: field, toByteOffset: offset, as: Field.self) }
        fieldCount += 1
    }

    /// A device push (`/3/device/<token>`, `apns-topic`, `apns-id`) or a broadcast
    /// (`/4/broadcasts/apps/<bundle id>`, `apns-channel-id`, `apns-request-id`; apns-reference.md §10).
    /// A channel id is indexed: broadcasts repeat the few channels of an app.
    /// - Parameter buffer: a buffer to write into, emptied first (a reused one keeps its capacity: no
    ///   allocation when it is large enough and no longer shared; `ByteBufferPool`).
    init(notification n: APNsNotification, authority: String, buffer: consuming [UInt8] = []) {
        bytes = consume buffer  // moved: a second reference would make the emptying below copy it
        bytes.removeAll(keepingCapacity: true)
        payload = n.payload
        waitClass = WaitClass(n)
        // Room for every header at once (no regrowth): the fixed names and values, the path, the topic or
        // channel, and the ids.
        var variable = n.topic.utf8.count + (n.apnsID?.utf8.count ?? 0) + (n.collapseID?.utf8.count ?? 0)
        switch n.target {
        case .device(let token): variable += token.hexCount
        case .channel(let channel): variable += channel.base64.utf8.count
        }
        // The ten headers below at most.
        reserve(fields: 10, text: 256 + variable)
        add(":method", "POST")
        add(":scheme", "https")
        switch n.target {  // n.path, written without building the String first
        case .device(let token): add(":path", prefix: "/3/device/", token, neverIndex: true)
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
        reserve(fields: 4 + headers.count, text: 128 + path.utf8.count + authority.utf8.count
                    + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count })
        add(":method", method)
        add(":scheme", "https")
        add(":path", path, neverIndex: true)
        add(":authority", authority)
        // HTTP/2 field names are lowercase (RFC 9113, 8.2.1); nghttp2 does not lowercase a name it is lent.
        // ASCII only, as nghttp2 did when it copied names.
        for (name, value) in headers {
            add(name: name.utf8.lazy.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, value, neverIndex: true)
        }
        self.maxResponseBody = maxResponseBody
        keepsResponseBody = true
    }

    /// The buffer the headers are in (a reference to it: for tests).
    var buffer: [UInt8] { bytes }

    /// Whether the request has a body: a GET or DELETE has none (END_STREAM on its HEADERS).
    var hasBody: Bool { !payload.isEmpty }

    /// Lends an `nghttp2_nv` array over these headers plus `authorization` (never indexed) if given.
    ///
    /// The fields in this request's buffer are lent to nghttp2 uncopied (`NO_COPY_NAME`, `NO_COPY_VALUE`): it
    /// reads them once, when it packs the HEADERS frame, so the buffer must outlive that. `HTTP2Session.submit`
    /// guarantees it: the stream request that holds this value stays in its connection's table until nghttp2
    /// reports the stream closed or its HEADERS not sent, or until the connection resets the stream (which
    /// cancels a HEADERS not yet packed) or ends its session; only then is the buffer given back to be
    /// reused. `authorization` (the current provider token, which a rotation may replace meanwhile) is
    /// copied by nghttp2.
    func withHeaders<R>(authorization: [UInt8]?, _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        var nva = [nghttp2_nv]()
        return withHeaders(authorization: authorization, scratch: &nva, body)
    }

    /// As `withHeaders(authorization:_:)`, building the array in `scratch` (a connection reuses one: no
    /// allocation per request).
    func withHeaders<R>(authorization: [UInt8]?, scratch nva: inout [nghttp2_nv], _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        bytes.withUnsafeBytes { raw in
            let base = UnsafeMutablePointer(mutating: raw.baseAddress!.assumingMemoryBound(to: UInt8.self))
            let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
            let lent = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
            nva.removeAll(keepingCapacity: true)
            nva.reserveCapacity(fieldCount + 1)
            for index in 0..<fieldCount {
                let f = raw.loadUnaligned(fromByteOffset: index * MemoryLayout<Field>.stride, as: Field.self)
                let neverIndex = f.nameLength & Field.neverIndexBit != 0
                nva.append(nghttp2_nv(
                    name: base + Int(f.nameStart), value: base + Int(f.valueStart),
                    namelen: Int(f.nameLength & ~Field.neverIndexBit), valuelen: Int(f.valueLength),
                    flags: neverIndex ? noIndex | lent : lent
                ))
            }
            guard let authorization else { return nva.withUnsafeBufferPointer(body) }
            return authorization.withUnsafeBufferPointer { auth in
                Self.authorizationName.withUTF8Buffer { name in
                    nva.append(nghttp2_nv(
                        name: UnsafeMutablePointer(mutating: name.baseAddress!),
                        value: UnsafeMutablePointer(mutating: auth.baseAddress!),
                        namelen: name.count, valuelen: auth.count, flags: noIndex | UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
                    ))
                    return nva.withUnsafeBufferPointer(body)
                }
            }
        }
    }
    private static let authorizationName: StaticString = "authorization"
}
