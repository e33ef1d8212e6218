import APNsCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What an answer's HEADERS say, read header by header as nghttp2 hands them over (`ConnectionIO.header`), and
/// the `APNsResponse` they make with the body once the stream closes.
///
/// A value apart from the connection so that the `apns-answer` fuzz target (Fuzz/) reads headers and bodies
/// exactly as a connection does.
package struct ResponseHead: Sendable, Hashable {
    /// `:status`; `nil` until one arrived.
    package var status: Int?
    package var id: APNsID?
    package var uniqueID: APNsID?
    package var channelID: String?

    package init() {}

    /// `id` and `uniqueID` as text.
    package var apnsID: String? { id?.description }
    package var apnsUniqueID: String? { uniqueID?.description }

    /// Takes one header of the answer; names APNs does not define are ignored.
    package mutating func read(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        if Self.is(name, ":status") {
            // Three digits (RFC 9110 §15). nghttp2 refuses anything else before we see it; this parse must not
            // rely on that: it summed every digit in the value, and a long one overflowed Int and trapped (found by
            // the `apns-answer` fuzz target). A malformed status leaves the answer without one, which ends the
            // stream as a connection failure, as nghttp2's own refusal does.
            guard value.count == 3, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                status = nil
                return
            }
            status = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        } else if Self.is(name, "apns-id") || Self.is(name, "apns-request-id") {
            id = APNsID(utf8: UnsafeRawBufferPointer(value))
        } else if Self.is(name, "apns-unique-id") {
            uniqueID = APNsID(utf8: UnsafeRawBufferPointer(value))
        } else if Self.is(name, "apns-channel-id") {
            channelID = String(decoding: value, as: UTF8.self)
        }
    }

    /// Whether a header's name is `literal` (nghttp2 hands names over lower-case): a length check and a
    /// `memcmp`, for every header of every answer.
    private static func `is`(_ name: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        guard name.count == literal.utf8CodeUnitCount, let base = name.baseAddress else { return false }
        return memcmp(base, literal.utf8Start, name.count) == 0
    }

    /// The answer, once its stream closed; `nil` when no `:status` came (the stream ended without one).
    /// - Parameter keepsBody: whether the caller needs the body (channel management), beyond its `reason`.
    package func response(body: [UInt8], keepsBody: Bool) -> APNsResponse? {
        guard let status else { return nil }
        let (reason, timestamp) = ResponseBody.parse(body)
        var response = APNsResponse(status: status, id: id, uniqueID: uniqueID, reason: reason, timestamp: timestamp)
        response.channelID = channelID
        if keepsBody { response.body = body }
        return response
    }
}
