import APNsCore
import Synchronization

/// The broadcast channels the mock knows (apns-reference.md §10), shared by the push listener (broadcast
/// sends) and the channel-management listener.
///
/// Channels belong to an app in one environment; each keeps the message-storage policy it was created with.
/// Ids are random and never issued twice, not even after the channel is deleted, so a deleted id stays
/// ChannelNotRegistered. The mock plays one environment (`APNsMockConfiguration.environment`), which the
/// methods use unless told otherwise; channels of the other environment exist only to be refused.
package final class ChannelRegistry: Sendable {
    /// The mock's environment: the default of every method.
    package let environment: APNsEnvironment
    /// Channels one app may have in one environment (CannotCreateChannelConfig beyond).
    package let maxChannelsPerApp: Int
    private let state = Mutex(State())

    private struct AppKey: Hashable {
        var environment: APNsEnvironment
        var bundleID: String
    }

    /// One app's channels in creation order, with their storage policies.
    private struct AppChannels {
        var order: [String] = []
        var policies: [String: Int] = [:]

        mutating func add(_ id: String, storagePolicy: Int) {
            order.append(id)
            policies[id] = storagePolicy
        }
    }

    private struct State {
        var apps: [AppKey: AppChannels] = [:]
        /// Every id ever issued, in any environment.
        var issued: Set<String> = []
    }

    init(environment: APNsEnvironment, maxChannelsPerApp: Int) {
        self.environment = environment
        self.maxChannelsPerApp = maxChannelsPerApp
    }

    /// Creates a channel and returns its new id (24 characters of standard base64).
    /// - Parameter storagePolicy: 0 (No Message Stored: sends must carry `apns-expiration: 0` or none) or 1 (Most
    ///   Recent Message Stored).
    /// - Throws: `ChannelRegistryError` `.invalidStoragePolicy`, or `.limitReached` when the app already has
    ///   `maxChannelsPerApp` channels in that environment.
    @discardableResult
    package func create(bundleID: String, storagePolicy: Int, environment: APNsEnvironment? = nil) throws(ChannelRegistryError) -> String {
        guard storagePolicy == 0 || storagePolicy == 1 else { throw ChannelRegistryError(code: .invalidStoragePolicy) }
        let key = AppKey(environment: environment ?? self.environment, bundleID: bundleID)
        let limit = maxChannelsPerApp
        return try state.withLock { state throws(ChannelRegistryError) in
            guard (state.apps[key]?.order.count ?? 0) < limit else { throw ChannelRegistryError(code: .limitReached) }
            var id = ChannelIDFormat.random()
            while !state.issued.insert(id).inserted { id = ChannelIDFormat.random() }
            state.apps[key, default: AppChannels()].add(id, storagePolicy: storagePolicy)
            return id
        }
    }

    /// Deletes a channel; returns whether it existed. Its id is never issued again.
    @discardableResult
    package func delete(bundleID: String, channelID: String, environment: APNsEnvironment? = nil) -> Bool {
        let key = AppKey(environment: environment ?? self.environment, bundleID: bundleID)
        return state.withLock { state in
            guard state.apps[key]?.policies.removeValue(forKey: channelID) != nil else { return false }
            state.apps[key]?.order.removeAll { $0 == channelID }
            return true
        }
    }

    /// The storage policy (0 or 1) of a channel of `bundleID`; `nil` when the app has no such channel there.
    package func storagePolicy(bundleID: String, channelID: String, environment: APNsEnvironment? = nil) -> Int? {
        let key = AppKey(environment: environment ?? self.environment, bundleID: bundleID)
        return state.withLock { $0.apps[key]?.policies[channelID] }
    }

    /// The ids of the app's channels, oldest first.
    package func channels(bundleID: String, environment: APNsEnvironment? = nil) -> [String] {
        let key = AppKey(environment: environment ?? self.environment, bundleID: bundleID)
        return state.withLock { $0.apps[key]?.order ?? [] }
    }
}

/// Why `ChannelRegistry.create` refused.
package struct ChannelRegistryError: Error, Hashable, CustomStringConvertible {
    /// What went wrong; compare with the static members.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case limitReached
            case invalidStoragePolicy
        }

        private let value: Value

        /// The app already has `maxChannelsPerApp` channels in the environment (APNs: CannotCreateChannelConfig).
        package static let limitReached = Code(value: .limitReached)
        /// The storage policy is neither 0 nor 1.
        package static let invalidStoragePolicy = Code(value: .invalidStoragePolicy)

        package var description: String {
            switch value {
            case .limitReached: "the app has the maximum number of channels"
            case .invalidStoragePolicy: "the message storage policy must be 0 or 1"
            }
        }
    }

    package var code: Code

    package init(code: Code) { self.code = code }

    package var description: String { code.description }
}
