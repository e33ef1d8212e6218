import APNsClient
import APNsCore

/// `apns-answer`: one input is an answer's header block and body, read by `ResponseHead` as a connection reads
/// them (a header at a time, as nghttp2 hands them over; the body once the stream closes).
///
/// Input format (text, close to how an answer is written down):
///
///     :status: 410
///     apns-id: 1B8E…
///
///     {"reason":"Unregistered","timestamp":1700000000000}
///
/// Header lines until the first empty line; a line's name runs to its first `:` after the first byte (so
/// `:status` works), and one space after that `:` is dropped. Everything after the empty line is the body. No
/// byte is rejected: nghttp2 checks names and values before the relay sees them, and the parser must not rely on
/// that.
enum APNsAnswerTarget {
    static func run(_ bytes: [UInt8]) {
        let (head, body) = answer(bytes)
        for keepsBody in [false, true] {
            guard let response = head.response(body: body, keepsBody: keepsBody) else { continue }
            precondition(response.status == head.status, "the answer's status is not the one read")
            precondition(keepsBody ? response.body == body : response.body.isEmpty, "the body kept is not the one received")
            // What the relay decides from an answer (retry, reject, remove the token) must not trap either.
            _ = DeliveryDecision(response: response).replacesConnection
        }
    }

    /// The headers read into a `ResponseHead`, and the body.
    static func answer(_ bytes: [UInt8]) -> (head: ResponseHead, body: [UInt8]) {
        var head = ResponseHead()
        var rest = bytes[...]
        while !rest.isEmpty {
            let end = rest.firstIndex(of: UInt8(ascii: "\n")) ?? rest.endIndex
            let line = rest[..<end]
            rest = end == rest.endIndex ? rest[end...] : rest[rest.index(after: end)...]
            if line.isEmpty { break }
            let colon = line.dropFirst().firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
            var value = line[colon...].dropFirst()
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
            Array(line[..<colon]).withUnsafeBufferPointer { name in
                Array(value).withUnsafeBufferPointer { value in head.read(name: name, value: value) }
            }
        }
        return (head, Array(rest))
    }
}
