import APNsCore
import APNsMock
import RelaySandbox

/// The soak's input: a production-like mix, the same in every hundred bulk events, keyed `s<n>` (bulk) and
/// `u<n>` (urgent sign-in codes).
///
/// Per hundred bulk events: 86 alerts to three apps (300-byte payloads), a background push, a VoIP push, a
/// Live Activity push, three broadcasts to Live Activity channels, a gone token (410 Unregistered: a
/// removed-token record), a token of the other environment (400 BadDeviceToken, 1 %: under the token-removal
/// guard's threshold), and two events the schema refuses (a missing payload, broken JSON: dead letters). One in
/// a thousand is a broadcast to a deleted channel (a removed-channel record).
///
/// Device tokens repeat every `tokenCycle` events, as a real app's audience does; the mock's per-token counters
/// stay bounded however long the run.
struct SoakTraffic: Sendable {
    static let tokenCycle = 20_000
    static let apps = ["com.example.app", "com.example.news", "com.example.game"]

    let channels: DemoChannels
    let nowSeconds: Int64

    private static func token(_ n: Int) -> String { SampleEvents.token(n % tokenCycle) }

    func bulk(_ n: Int) -> (key: String, value: [UInt8]) {
        let id = "s\(n)"
        let token = Self.token(n)
        let value: [UInt8]
        switch n % 100 {
        case 7, 13:
            value = SampleEvents.event(id: id, deviceToken: token)
        case 19:
            value = Array(#"{"id":"\#(id)","deviceToken":"\#(token)","topic":"com.example.app","pushType":"alert"}"#.utf8)
        case 29:
            value = Array(#"{"id": "\#(id)", "deviceToken": "#.utf8)
        case 43:
            value = SampleEvents.event(id: id, deviceToken: token, pushType: .background, priority: 5, payload: #"{"aps":{"content-available":1}}"#)
        case 44:
            value = SampleEvents.event(id: id, deviceToken: token, pushType: .voip, priority: 10, payload: #"{"aps":{},"call":"incoming"}"#)
        case 45:
            let live = #"{"aps":{"timestamp":\#(nowSeconds),"event":"update","content-state":{"score":"2-1"}}}"#
            value = SampleEvents.event(id: id, deviceToken: token, pushType: .liveactivity, priority: 10, payload: live)
        case 47, 48:
            let update = SampleEvents.liveActivityUpdate(score: "\(n / 100)-\(n % 3)", timestamp: Int(nowSeconds))
            value = SampleEvents.broadcast(id: id, channelID: channels.stored, topic: channels.bundleID, priority: 10, payload: update)
        case 49 where n % 1000 == 49:
            value = SampleEvents.broadcast(id: id, channelID: channels.deleted, topic: channels.bundleID)
        case 49:
            value = SampleEvents.broadcast(id: id, channelID: channels.unstored, topic: channels.bundleID, priority: 5, expiration: 0)
        default:
            value = SampleEvents.event(id: id, deviceToken: token, topic: Self.apps[n % Self.apps.count], payload: SampleEvents.payload(bytes: 300))
        }
        return (key: id, value: value)
    }

    func urgent(_ n: Int) -> (key: String, value: [UInt8]) {
        let id = "u\(n)"
        let payload = #"{"aps":{"alert":{"title":"Your sign-in code","body":"\#(100_000 + n % 900_000)"},"interruption-level":"time-sensitive"}}"#
        return (key: id, value: SampleEvents.event(id: id, deviceToken: SampleEvents.token(1_000_000 + n % 1000), priority: 10, payload: payload))
    }

    /// Tells the mock which of the cycle's tokens are gone (410) and which belong to the other environment (400).
    func arm(_ apns: APNsMockServer) {
        for t in stride(from: 7, to: Self.tokenCycle, by: 100) {
            apns.registry.unregister(Self.token(t), sinceMilliseconds: (nowSeconds - 86_400) * 1000)
        }
        for t in stride(from: 13, to: Self.tokenCycle, by: 100) {
            apns.registry.register(Self.token(t), environment: .production)
        }
    }
}
