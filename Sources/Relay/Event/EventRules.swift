import APNsCore
import CEventJSON

/// The value rules of `Schemas/notification-event.schema.json`, checked on the fields simdjson found.
///
/// Keep in step with the schema: the differential test compares every verdict with valijson's.
enum EventRules {
    static let requiredFields: [(UInt32, String)] = [
        (UInt32(CEJ_FIELD_ID), "id"),
        (UInt32(CEJ_FIELD_TOPIC), "topic"),
        (UInt32(CEJ_FIELD_PUSH_TYPE), "pushType"),
        (UInt32(CEJ_FIELD_PAYLOAD), "payload"),
    ]
    static let requiredMask = UInt32(CEJ_FIELD_ID | CEJ_FIELD_TOPIC | CEJ_FIELD_PUSH_TYPE | CEJ_FIELD_PAYLOAD)
    static let maxIDCharacters = 256
    static let maxDeviceTokenCharacters = 400
    static let maxTopicCharacters = 255
    static let maxCollapseIDCharacters = 64
    static let maxExpiration: Int64 = 9_999_999_999

    /// - Parameter source: the bytes `input` points into, if any: the payload is a slice of them, not a copy.
    static func check(_ event: cej_event, input: UnsafeRawBufferPointer, source: ArraySlice<UInt8>? = nil) throws(EventDecodingError) -> NotificationEvent {
        if event.present & requiredMask != requiredMask {
            for (field, name) in requiredFields where event.present & field == 0 {
                throw violation(name, "is required")
            }
        }

        // id: 1...256 characters.
        let idLength = codePoints(event.id)
        guard idLength >= 1, idLength <= maxIDCharacters else {
            throw violation("id", "must be 1 to \(maxIDCharacters) characters; it has \(idLength)")
        }
        if hasControlCharacter(event.id) {
            throw violation("id", "must not contain control characters (U+0000 to U+001F)")
        }

        // The target: `deviceToken` (a device push) or `channelId` (a broadcast), and what each excludes.
        let target = try self.target(event)

        // topic: 1...255 of [A-Za-z0-9_.-].
        let topicBytes = bytes(event.topic)
        guard topicBytes.count >= 1, topicBytes.count <= maxTopicCharacters else {
            throw violation("topic", "must be 1 to \(maxTopicCharacters) characters")
        }
        for byte in topicBytes where !isTopicByte(byte) {
            throw violation("topic", "does not match pattern ^[A-Za-z0-9_.-]+$")
        }

        guard let pushType = PushType(rawValue: string(event.push_type)) else {
            let allowed = PushType.allCases.map(\.rawValue).joined(separator: ", ")
            throw violation("pushType", "must be one of \(allowed)")
        }
        if case .channel = target, pushType != .liveactivity {
            throw violation("pushType", "must be liveactivity for a broadcast (an event with channelId)")
        }

        // Omitted: what APNs requires for the push type (5 for background), else APNs' default.
        var priority = pushType.requiredPriority
        if event.present & UInt32(CEJ_FIELD_PRIORITY) != 0 {
            guard let value = Priority(rawValue: Int(event.priority)) else {
                throw violation("priority", "must be 10, 5 or 1")
            }
            priority = value
        }

        var expiration: Int64?
        if event.present & UInt32(CEJ_FIELD_EXPIRATION) != 0 {
            guard event.expiration >= 0, event.expiration <= maxExpiration else {
                throw violation("expiration", "must be UNIX seconds from 0 to \(maxExpiration)")
            }
            expiration = event.expiration
        }

        var collapseID: String?
        if event.present & UInt32(CEJ_FIELD_COLLAPSE_ID) != 0 {
            let length = codePoints(event.collapse_id)
            guard length >= 1, length <= maxCollapseIDCharacters else {
                throw violation("collapseId", "must be 1 to \(maxCollapseIDCharacters) characters; it has \(length)")
            }
            if hasControlCharacter(event.collapse_id) {
                throw violation("collapseId", "must not contain control characters (U+0000 to U+001F)")
            }
            collapseID = string(event.collapse_id)
        }

        var apnsID: String?
        if event.present & UInt32(CEJ_FIELD_APNS_ID) != 0 {
            guard isCanonicalUUID(bytes(event.apns_id)) else {
                throw violation("apnsId", "must be a canonical UUID (8-4-4-4-12 hex digits)")
            }
            apnsID = string(event.apns_id)
        }
        if event.present & UInt32(CEJ_FIELD_APNS_REQUEST_ID) != 0 {
            guard isCanonicalUUID(bytes(event.apns_request_id)) else {
                throw violation("apnsRequestId", "must be a canonical UUID (8-4-4-4-12 hex digits)")
            }
            apnsID = string(event.apns_request_id)
        }

        var environment = APNsEnvironment.production
        if event.present & UInt32(CEJ_FIELD_ENVIRONMENT) != 0 {
            guard let value = APNsEnvironment(rawValue: string(event.environment)) else {
                throw violation("environment", "must be production or development")
            }
            environment = value
        }

        let payload = source.map { slice($0, event.payload) } ?? slice(input, event.payload)[...]
        let metadata = event.present & UInt32(CEJ_FIELD_METADATA) != 0 ? slice(input, event.metadata) : nil

        switch target {
        case .device(let deviceToken):
            return NotificationEvent(
                id: string(event.id), deviceToken: deviceToken, topic: string(event.topic), pushType: pushType,
                priority: priority, expiration: expiration, collapseID: collapseID, apnsID: apnsID,
                environment: environment, payload: payload, metadata: metadata
            )
        case .channel(let channelID):
            return NotificationEvent(
                id: string(event.id), channelID: channelID, topic: string(event.topic), priority: priority,
                expiration: expiration, requestID: apnsID, environment: environment, payload: payload, metadata: metadata
            )
        }
    }

    /// `deviceToken` (even number of hex digits, at most 400) or `channelId` (base64, at most 128
    /// characters), never both; a broadcast has no `collapseId` or `apnsId`, a device push no `apnsRequestId`
    /// (the schema's `anyOf` and `dependencies`).
    private static func target(_ event: cej_event) throws(EventDecodingError) -> PushTarget {
        let has = { (field: Int) in event.present & UInt32(field) != 0 }
        if has(CEJ_FIELD_CHANNEL_ID) {
            if has(CEJ_FIELD_DEVICE_TOKEN) {
                throw violation("deviceToken", "must not be given with channelId: an event is a device push or a broadcast")
            }
            if has(CEJ_FIELD_COLLAPSE_ID) { throw violation("collapseId", "is not allowed in a broadcast (an event with channelId)") }
            if has(CEJ_FIELD_APNS_ID) { throw violation("apnsId", "is not allowed in a broadcast; its id is apnsRequestId") }
            do {
                return .channel(try ChannelID(base64: string(event.channel_id)))
            } catch {
                throw violation("channelId", "must be 1 to \(ChannelID.maxCharacters) characters matching ^[A-Za-z0-9+/]+={0,2}$ (\(error))")
            }
        }
        guard has(CEJ_FIELD_DEVICE_TOKEN) else {
            throw violation("deviceToken", "is required (or channelId, for a broadcast)")
        }
        if has(CEJ_FIELD_APNS_REQUEST_ID) {
            throw violation("apnsRequestId", "is not allowed in a device push; its id is apnsId")
        }
        guard event.device_token.len <= maxDeviceTokenCharacters else {
            throw violation("deviceToken", "must be at most \(maxDeviceTokenCharacters) characters")
        }
        do {
            return .device(try DeviceToken(hexUTF8: bytes(event.device_token)))
        } catch {
            throw violation("deviceToken", "does not match pattern ^([0-9a-fA-F]{2})+$ (\(error))")
        }
    }

    // MARK: Helpers

    static func violation(_ field: String, _ message: String) -> EventDecodingError {
        EventDecodingError(code: .schemaViolation, pointer: "/" + field, message: message)
    }

    static func bytes(_ text: cej_string) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: text.ptr, count: text.ptr == nil ? 0 : text.len)
    }

    /// The decoder's unescaped text as a `String`; simdjson has checked it is UTF-8.
    static func string(_ text: cej_string) -> String {
        String(decoding: bytes(text), as: UTF8.self)
    }

    /// JSON Schema counts lengths in Unicode code points: count the bytes that start a UTF-8 sequence.
    static func codePoints(_ text: cej_string) -> Int {
        var count = 0
        for byte in bytes(text) where byte & 0xC0 != 0x80 {
            count += 1
        }
        return count
    }

    /// The schema's `"not": {"pattern": "[\\x00-\\x1F]"}`.
    static func hasControlCharacter(_ text: cej_string) -> Bool {
        bytes(text).contains { $0 < 0x20 }
    }

    /// `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$` on bytes (the same
    /// rule as `APNsNotification.isCanonicalUUID`, without building a `String` first).
    static func isCanonicalUUID(_ text: UnsafeRawBufferPointer) -> Bool {
        guard text.count == 36 else { return false }
        for index in 0..<36 {
            let byte = text[index]
            switch index {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return false }
            default:
                guard isHexDigit(byte) else { return false }
            }
        }
        return true
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default:
            false
        }
    }

    static func isTopicByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }

    /// `range` (offsets from the start of `source`) of `source`, whatever its indices.
    static func slice(_ source: ArraySlice<UInt8>, _ range: cej_range) -> ArraySlice<UInt8> {
        guard range.offset <= source.count, range.len <= source.count - range.offset else { return [] }
        let start = source.startIndex + range.offset
        return source[start..<(start + range.len)]
    }

    static func slice(_ input: UnsafeRawBufferPointer, _ range: cej_range) -> [UInt8] {
        guard range.offset <= input.count, range.len <= input.count - range.offset else { return [] }
        return Array(UnsafeRawBufferPointer(rebasing: input[range.offset..<(range.offset + range.len)]))
    }

    static func name(ofField field: UInt32) -> String {
        switch Int(field) {
        case Int(CEJ_FIELD_ID): "id"
        case Int(CEJ_FIELD_DEVICE_TOKEN): "deviceToken"
        case Int(CEJ_FIELD_TOPIC): "topic"
        case Int(CEJ_FIELD_PUSH_TYPE): "pushType"
        case Int(CEJ_FIELD_PRIORITY): "priority"
        case Int(CEJ_FIELD_EXPIRATION): "expiration"
        case Int(CEJ_FIELD_COLLAPSE_ID): "collapseId"
        case Int(CEJ_FIELD_APNS_ID): "apnsId"
        case Int(CEJ_FIELD_ENVIRONMENT): "environment"
        case Int(CEJ_FIELD_PAYLOAD): "payload"
        case Int(CEJ_FIELD_METADATA): "metadata"
        case Int(CEJ_FIELD_CHANNEL_ID): "channelId"
        case Int(CEJ_FIELD_APNS_REQUEST_ID): "apnsRequestId"
        default: ""
        }
    }

    static func expectedType(ofField field: UInt32) -> String {
        switch Int(field) {
        case Int(CEJ_FIELD_PRIORITY), Int(CEJ_FIELD_EXPIRATION): "an integer (no fraction or exponent)"
        case Int(CEJ_FIELD_PAYLOAD), Int(CEJ_FIELD_METADATA): "an object"
        default: "a string"
        }
    }

    static func escapePointerToken(_ token: String) -> String {
        var escaped = ""
        for character in token.unicodeScalars {
            switch character {
            case "~": escaped += "~0"
            case "/": escaped += "~1"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }
}
