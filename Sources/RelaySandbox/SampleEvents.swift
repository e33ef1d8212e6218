import APNsCore
import Foundation

/// Realistic notification events, valid and not, for the demo, the tests and the benchmarks.
package enum SampleEvents {
    /// One event as JSON bytes (keys in a stable order; `payload` and `metadata` as given).
    package static func event(
        id: String, deviceToken: String, topic: String = "com.example.app", pushType: PushType = .alert,
        priority: Int? = nil, expiration: Int64? = nil, collapseID: String? = nil,
        environment: APNsEnvironment = .development, payload: String = #"{"aps":{"alert":{"title":"Hello","body":"World"}}}"#,
        metadata: String? = nil
    ) -> [UInt8] {
        var fields = [
            #""id":\#(quoted(id))"#, #""deviceToken":\#(quoted(deviceToken))"#, #""topic":\#(quoted(topic))"#,
            #""pushType":"\#(pushType.rawValue)""#, #""environment":"\#(environment.rawValue)""#,
        ]
        if let priority { fields.append(#""priority":\#(priority)"#) }
        if let expiration { fields.append(#""expiration":\#(expiration)"#) }
        if let collapseID { fields.append(#""collapseId":\#(quoted(collapseID))"#) }
        fields.append(#""payload":\#(payload)"#)
        if let metadata { fields.append(#""metadata":\#(metadata)"#) }
        return Array(("{" + fields.joined(separator: ",") + "}").utf8)
    }

    /// One broadcast event (a Live Activity update to a channel) as JSON bytes.
    package static func broadcast(
        id: String, channelID: String, topic: String = "com.example.app", priority: Int? = nil, expiration: Int64? = nil,
        environment: APNsEnvironment = .development, payload: String = liveActivityUpdate(score: "1-0"), metadata: String? = nil
    ) -> [UInt8] {
        var fields = [
            #""id":\#(quoted(id))"#, #""channelId":\#(quoted(channelID))"#, #""topic":\#(quoted(topic))"#,
            #""pushType":"liveactivity""#, #""environment":"\#(environment.rawValue)""#,
        ]
        if let priority { fields.append(#""priority":\#(priority)"#) }
        if let expiration { fields.append(#""expiration":\#(expiration)"#) }
        fields.append(#""payload":\#(payload)"#)
        if let metadata { fields.append(#""metadata":\#(metadata)"#) }
        return Array(("{" + fields.joined(separator: ",") + "}").utf8)
    }

    /// A Live Activity update payload (`content-state` with a score).
    package static func liveActivityUpdate(score: String, timestamp: Int = 1_763_800_000) -> String {
        #"{"aps":{"timestamp":\#(timestamp),"event":"update","content-state":{"score":\#(quoted(score))}}}"#
    }

    /// A random-looking but deterministic 32-byte token (64 hex digits) for index `n`.
    package static func token(_ n: Int, salt: UInt64 = 0x5EED) -> String {
        var state = UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9_7F4A_7C15 ^ salt
        var hex = ""
        hex.reserveCapacity(64)
        for _ in 0..<4 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let word = String(state, radix: 16)
            hex += String(repeating: "0", count: 16 - word.count) + word
        }
        return hex
    }

    /// A payload of about `bytes` bytes.
    package static func payload(bytes: Int) -> String {
        let prefix = #"{"aps":{"alert":{"title":"Update","body":""#
        let suffix = #""}}}"#
        let fill = max(0, bytes - prefix.utf8.count - suffix.utf8.count)
        return prefix + String(repeating: "x", count: fill) + suffix
    }

    private static func quoted(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }
}
