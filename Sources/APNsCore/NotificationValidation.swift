/// How a connection authenticates, which decides some push-type rules.
package enum AuthenticationKind: String, Hashable, Sendable {
    case token
    case certificate
}

/// A notification that APNs would refuse, found before sending it.
///
/// `reason` is what APNs would answer, so results read the same whether the relay or APNs refused.
package struct NotificationRuleViolation: Error, Hashable, Sendable, CustomStringConvertible {
    package let reason: APNsReason
    package let message: String

    package init(_ reason: APNsReason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    package var description: String { "\(reason): \(message)" }
}

extension APNsNotification {
    /// Checks the rules APNs enforces on a device push (apns-reference.md §2–§5) or a broadcast (§10).
    ///
    /// - Parameters:
    ///   - authentication: the credential kind the push will use, or `nil` to skip credential rules.
    ///   - now: current time in UNIX seconds, to refuse an already-passed non-zero expiration.
    /// - Throws: the first `NotificationRuleViolation` found.
    package func validate(authentication: AuthenticationKind? = nil, now: Int64? = nil) throws(NotificationRuleViolation) {
        if let apnsID, !Self.isCanonicalUUID(apnsID) {
            throw .init(.badMessageId, "apns-id must be a canonical UUID (8-4-4-4-12 hex digits)")
        }
        if topic.isEmpty {
            throw .init(.missingTopic, "apns-topic is empty")
        }
        if !Self.isFieldValue(topic) {
            throw .init(.badTopic, "apns-topic must be printable ASCII without spaces at its ends (an HTTP/2 header value)")
        }
        if let collapseID {
            if collapseID.utf8.count > 64 {
                throw .init(.badCollapseId, "apns-collapse-id is \(collapseID.utf8.count) bytes; at most 64 allowed")
            }
            if collapseID.isEmpty || !Self.isFieldValue(collapseID) {
                throw .init(
                    .badCollapseId,
                    "apns-collapse-id must be 1 to 64 printable ASCII characters (space to ~) without a space at either end: "
                        + "it is sent as an HTTP/2 header value")
            }
        }
        if pushType == .background, priority != .powerConsiderate {
            throw .init(.badPriority, "background pushes must have priority 5")
        }
        if isBroadcast {
            try validateBroadcastTarget()
        } else {
            let suffix = pushType.topicSuffix
            if !suffix.isEmpty, !topic.hasSuffix(suffix) {
                throw .init(.badTopic, "apns-topic for push type \(pushType.rawValue) must end with \"\(suffix)\"")
            }
        }
        if let expiration {
            if expiration < 0 {
                throw .init(.badExpirationDate, "apns-expiration must be 0 or UNIX seconds")
            }
            if let now, expiration != 0, expiration < now {
                throw .init(.badExpirationDate, "apns-expiration \(expiration) has already passed")
            }
        }
        switch authentication {
        case .token where !pushType.allowedWithToken:
            throw .init(.invalidPushType, "push type \(pushType.rawValue) needs certificate authentication")
        case .certificate where !pushType.allowedWithCertificate:
            throw .init(.invalidPushType, "push type \(pushType.rawValue) needs token authentication")
        default:
            break
        }
        if payload.isEmpty {
            throw .init(.payloadEmpty, "payload is empty")
        }
        if payload.count > maxPayloadBytes {
            let kind = isBroadcast ? "a broadcast" : pushType.rawValue
            throw .init(.payloadTooLarge, "payload is \(payload.count) bytes; \(kind) allows \(maxPayloadBytes)")
        }
    }

    /// What only broadcasts must satisfy: the Live Activity push type, a bundle id fit for the path (no
    /// push-type suffix: APNs answers TopicDisallowed), no collapse id (broadcasts have none).
    private func validateBroadcastTarget() throws(NotificationRuleViolation) {
        if pushType != .liveactivity {
            throw .init(.invalidPushType, "broadcasts must have push type liveactivity, not \(pushType.rawValue)")
        }
        if PushType.suffix(in: topic) != nil || topic.contains("/") {
            throw .init(.topicDisallowed, "a broadcast names the bundle id alone, without a push-type suffix: \(topic)")
        }
        if !Self.isBundleID(topic) {
            throw .init(
                .badTopic,
                "a broadcast's topic is a bundle id in the request path: segments of A-Z a-z 0-9 - separated by single dots")
        }
        if collapseID != nil {
            throw .init(.badCollapseId, "broadcasts have no apns-collapse-id")
        }
    }

    /// `true` for a bundle id: one or more segments of `A-Z a-z 0-9 -` separated by single dots, no dot at
    /// either end (Apple's rule for `CFBundleIdentifier`). Safe as a path segment: never `.` or `..`, no `/`,
    /// `%` or `?`. The push-type suffixes (`.voip`, `.push-type.liveactivity`, …) keep a topic of this shape.
    package static func isBundleID(_ string: String) -> Bool {
        var segmentLength = 0
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "."):
                guard segmentLength > 0 else { return false }
                segmentLength = 0
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                segmentLength += 1
            default:
                return false
            }
        }
        return segmentLength > 0
    }

    /// `true` when `string` can go out as an HTTP/2 field value unchanged: RFC 9113 §8.2.1 makes a value with
    /// a leading or trailing space or tab, or with NUL, CR or LF, malformed (the stream is reset), and RFC 9110
    /// §5.5 leaves other control characters, DEL and non-ASCII bytes to be mangled or refused on the way. So:
    /// visible ASCII (`!` to `~`) and interior spaces only. An empty string passes.
    package static func isFieldValue(_ string: String) -> Bool {
        let bytes = string.utf8
        if bytes.first == UInt8(ascii: " ") || bytes.last == UInt8(ascii: " ") { return false }
        return bytes.allSatisfy { (UInt8(ascii: " ")...UInt8(ascii: "~")).contains($0) }
    }

    /// `true` for `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in hex digits of either case.
    package static func isCanonicalUUID(_ string: String) -> Bool {
        var count = 0
        for (index, byte) in string.utf8.enumerated() {
            count += 1
            switch index {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return false }
            default:
                guard byte.isHexDigit else { return false }
            }
        }
        return count == 36
    }
}

extension UInt8 {
    @inlinable
    var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
            || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}
