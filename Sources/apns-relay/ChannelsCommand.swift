import APNsClient
import APNsCore
import ArgumentParser
import Foundation
import Logging
import Relay
import RelayApp

/// `apns-relay channels`: manage the broadcast channels of an app (iOS 18 Live Activities) with the relay's
/// own credentials and configuration.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Create, read, delete and list broadcast channels (Live Activities, iOS 18) on APNs' management hosts.",
        discussion: """
            Uses the relay's configuration (--config, APNS_RELAY_* variables, --set) for the credential (the first \
            whose apns topics cover --bundle-id, as for pushes), the CA file, the proxy and the management \
            endpoints (apns.production.managementHost/managementPort, default api-manage-broadcast.push.apple.com:2196; \
            apns.development.* default api-manage-broadcast.sandbox.push.apple.com:2195). Kafka settings are not needed.
            Prints one JSON object on standard output. Exit status: 0 done, 1 refused by APNs (the reason is \
            printed on standard error), 2 a configuration problem, 3 no answer (connection or timeout), 64 wrong \
            or missing arguments.
            """,
        subcommands: [Create.self, Get.self, Delete.self, List.self]
    )

    /// What every subcommand takes.
    struct Common: ParsableArguments {
        @OptionGroup var options: ConfigurationOptions

        @Option(help: "The app's bundle id (without a push-type suffix).")
        var bundleId: String

        @Option(help: "production or development: channels exist in one environment only.")
        var environment = "production"

        @Option(help: "How long to wait for APNs' answer, in milliseconds.")
        var timeoutMs = 15_000

        func validate() throws {
            guard APNsEnvironment(rawValue: environment) != nil else {
                throw ValidationError("--environment must be production or development, not '\(environment)'")
            }
            guard !bundleId.isEmpty, !bundleId.contains("/"), !bundleId.contains("?") else {
                throw ValidationError("--bundle-id must be a bundle id, not '\(bundleId)'")
            }
            if let suffix = PushType.suffix(in: bundleId) {
                throw ValidationError("--bundle-id takes the bundle id alone, without the push-type suffix \(suffix)")
            }
            guard timeoutMs > 0 else { throw ValidationError("--timeout-ms must be positive") }
        }

        var apnsEnvironment: APNsEnvironment { APNsEnvironment(rawValue: environment) ?? .production }

        /// Runs `body` with a channel manager for the bundle's credential, then prints its JSON answer.
        func run(_ body: (ChannelManager, APNsEnvironment) async throws -> [String: Any]) async throws {
            let (manager, eventLoops) = try await makeManager()
            let outcome: Result<[String: Any], any Error> = try await eventLoops.withRunningLoops {
                let outcome: Result<[String: Any], any Error>
                do {
                    outcome = .success(try await body(manager, apnsEnvironment))
                } catch {
                    outcome = .failure(error)
                }
                await manager.shutdown()
                return outcome
            }
            switch outcome {
            case .success(var object):
                object["bundleId"] = bundleId
                object["environment"] = environment
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                print(String(decoding: data, as: UTF8.self))
            case .failure(let error as ChannelManagementError):
                let hint = error.reason == .channelNotRegistered
                    ? " (deleted, or made in the other environment: this was --environment \(environment))" : ""
                Self.fail("\(error)\(hint)", exitCode: 1)
            case .failure(let error as APNsClientError):
                Self.fail("no answer from APNs: \(error.message)", exitCode: error.code == .transport ? 3 : 2)
            case .failure(let error):
                Self.fail("\(error)", exitCode: 2)
            }
        }

        private func makeManager() async throws -> (ChannelManager, APNsEventLoopGroup) {
            let configuration: RelayAppConfiguration
            do {
                configuration = try RelayAppConfiguration(reader: try await options.sources(), requireKafka: false)
            } catch {
                Self.fail("\(error)", exitCode: 2)
            }
            var logger = Logger(label: "apns-relay.channels")
            logger.logLevel = .error
            guard let credential = configuration.apns.credentials.first(where: { $0.covers(bundleId, in: apnsEnvironment) }) else {
                Self.fail("no credential covers bundle id \(bundleId) in \(environment) (apns.topics, apns.environments, apns.credential.NAME.topics, …environments)", exitCode: 2)
            }
            do {
                let eventLoops = try RelayApp.eventLoops(configuration.apns)
                return (try RelayApp.channelManager(
                    configuration.apns, credential: credential, timeout: .milliseconds(timeoutMs), eventLoops: eventLoops, logger: logger), eventLoops)
            } catch {
                Self.fail("\(error)", exitCode: 2)
            }
        }

        private static func fail(_ message: String, exitCode: Int32) -> Never {
            FileHandle.standardError.write(Data("error: \(message)\n".utf8))
            Foundation.exit(exitCode)
        }
    }

    /// A channel id given on the command line.
    static func channelID(_ text: String) throws -> ChannelID {
        do {
            return try ChannelID(base64: text)
        } catch {
            throw ValidationError("--channel-id: \(error)")
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a channel; prints its id (chosen by APNs).",
            discussion: "Not retried: a create whose answer was lost may have made a channel (list them to see)."
        )

        @OptionGroup var common: Common

        @Option(help: ArgumentHelp(
            "Message storage policy, fixed for the channel's life: 0 (no message stored: higher budget, every broadcast needs expiration 0) or 1 (the most recent message is stored).",
            valueName: "0|1"))
        var storagePolicy: Int

        func validate() throws {
            guard ChannelManager.StoragePolicy(rawValue: storagePolicy) != nil else {
                throw ValidationError("--storage-policy must be 0 or 1")
            }
        }

        func run() async throws {
            let policy = ChannelManager.StoragePolicy(rawValue: storagePolicy)!
            try await common.run { manager, environment in
                let id = try await manager.create(bundleID: common.bundleId, storagePolicy: policy, environment: environment)
                return ["channelId": id.base64, "messageStoragePolicy": policy.rawValue]
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a channel's storage policy and push type.")

        @OptionGroup var common: Common

        @Option(help: "The channel's id (base64).")
        var channelId: String

        func validate() throws { _ = try ChannelsCommand.channelID(channelId) }

        func run() async throws {
            let id = try ChannelsCommand.channelID(channelId)
            try await common.run { manager, environment in
                let channel = try await manager.channel(id, bundleID: common.bundleId, environment: environment)
                return ["channelId": id.base64, "messageStoragePolicy": channel.storagePolicy.rawValue, "pushType": channel.pushType]
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a channel. Its id is never issued again; broadcasts to it answer ChannelNotRegistered.")

        @OptionGroup var common: Common

        @Option(help: "The channel's id (base64).")
        var channelId: String

        func validate() throws { _ = try ChannelsCommand.channelID(channelId) }

        func run() async throws {
            let id = try ChannelsCommand.channelID(channelId)
            try await common.run { manager, environment in
                try await manager.delete(id, bundleID: common.bundleId, environment: environment)
                return ["channelId": id.base64, "deleted": true]
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the ids of every channel of the app in the environment.")

        @OptionGroup var common: Common

        func run() async throws {
            try await common.run { manager, environment in
                let ids = try await manager.list(bundleID: common.bundleId, environment: environment)
                return ["channels": ids.map(\.base64), "count": ids.count]
            }
        }
    }
}
