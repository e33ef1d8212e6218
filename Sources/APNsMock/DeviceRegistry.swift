import APNsCore
import Synchronization

/// Device tokens the mock knows something about. Unknown tokens are accepted.
///
/// Keys are lower-case hex; registering normalises case.
package final class DeviceRegistry: Sendable {
    /// What the mock answers for a token.
    package enum State: Sendable, Hashable {
        /// Active, but only for this bundle id (other topics → 400 DeviceTokenNotForTopic) and, when given,
        /// only in this environment (the other environment → 400 BadDeviceToken).
        case active(bundleID: String?, environment: APNsEnvironment?)
        /// 410 Unregistered with `timestamp` = `sinceMilliseconds`.
        case unregistered(sinceMilliseconds: Int64)
        /// 410 ExpiredToken.
        case expired
        /// Every request answered `reason` with its status (e.g. `.serviceUnavailable`: a push the test wants
        /// retried until it expires). Not something APNs does per device; a fault for tests.
        case failing(APNsReason)
    }

    private let entries = Mutex<[String: State]>([:])
    private let count = Atomic<Int>(0)

    init() {}

    /// Records `state` for `deviceToken` (hex, any case).
    package func set(_ deviceToken: String, _ state: State) {
        let key = deviceToken.lowercased()
        entries.withLock { entries in
            entries[key] = state
            count.store(entries.count, ordering: .relaxed)
        }
    }

    /// Shorthand: `deviceToken` belongs to `bundleID` (and, if given, `environment`).
    package func register(_ deviceToken: String, bundleID: String? = nil, environment: APNsEnvironment? = nil) {
        set(deviceToken, .active(bundleID: bundleID, environment: environment))
    }

    /// Shorthand: `deviceToken` is unregistered since `sinceMilliseconds`.
    package func unregister(_ deviceToken: String, sinceMilliseconds: Int64) {
        set(deviceToken, .unregistered(sinceMilliseconds: sinceMilliseconds))
    }

    /// Forgets `deviceToken` (it becomes an unknown, accepted token).
    package func remove(_ deviceToken: String) {
        let key = deviceToken.lowercased()
        entries.withLock { entries in
            entries[key] = nil
            count.store(entries.count, ordering: .relaxed)
        }
    }

    package func removeAll() {
        entries.withLock { entries in
            entries.removeAll()
            count.store(0, ordering: .relaxed)
        }
    }

    /// The state of a lower-case token; `nil` when unknown. Lock-free when the registry is empty (benchmarks).
    func state(ofLowercased token: String) -> State? {
        if count.load(ordering: .relaxed) == 0 { return nil }
        return entries.withLock { $0[token] }
    }
}
