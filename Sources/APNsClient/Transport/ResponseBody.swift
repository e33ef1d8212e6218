import APNsCore
import Foundation

/// Decodes an APNs error body: `{"reason":"…"}` and, with 410, `"timestamp": <ms>`.
enum ResponseBody {
    static func parse(_ body: [UInt8]) -> (APNsReason?, Int64?) {
        guard !body.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        else { return (nil, nil) }
        let reason = (object["reason"] as? String).map(APNsReason.init(rawValue:))
        let timestamp = (object["timestamp"] as? NSNumber)?.int64Value
        return (reason, timestamp)
    }
}
