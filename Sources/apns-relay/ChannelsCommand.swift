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
            Prints one JSON object on standard output. `delete` prints what it would delete on standard error \
            first and deletes only with --yes (or once you answer y when run in a terminal). Exit status: 0 \
            done (or nothing deleted without --yes), 1 refused by APNs (the reason is printed on standard \
            error), 2 a configuration problem, 3 no answer (connection or timeout), 64 wrong or missing \
            arguments.
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
            // It becomes a segment of the management request's path: `..`, `#`, CR or LF would change the request.
            guard APNsNotification.isBundleID(bundleId) else {
                throw ValidationError("--bundle-id must be a bundle id (segments of A-Z a-z 0-9 - separated by single dots), not '\(bundleId.debugDescription.dropFirst().dropLast())'")
            }
            if let suffix = PushType.suffix(in: bundleId) {
                throw ValidationError("--bundle-id takes the bundle id alone, without the push-type suffix \(suffix)")
            }
            guard timeoutMs > 0 else { throw ValidationError("--timeout-ms must be positive") }
        }

        var apnsEnvironment: APNsEnvironment { APNsEnvironment(rawValue: environment) ?? .production }

        /// The relay's configuration and the credential that covers `--bundle-id` in `--environment`; exits with
        /// status 2 when either is missing.
        func setting() async throws -> Setting {
            let configuration: RelayAppConfiguration
            do {
                configuration = try RelayAppConfiguration(reader: try await options.sources(), requireKafka: false)
            } catch {
                Self.fail("\(error)", exitCode: 2)
            }
            guard let credential = configuration.apns.credentials.first(where: { $0.covers(bundleId, in: apnsEnvironment) }) else {
                Self.fail("no credential covers bundle id \(bundleId) in \(environment) (apns.topics, apns.environments, apns.credential.NAME.topics, …environments)", exitCode: 2)
            }
            return Setting(configuration: configuration, credential: credential)
        }

        struct Setting {
            var configuration: RelayAppConfiguration
            var credential: RelayAppConfiguration.APNs.Credential
        }

        /// `host:port` of the environment's channel-management endpoint.
        func managementHost(_ setting: Setting) -> String {
            let endpoint = setting.configuration.apns.managementEndpoints[apnsEnvironment]
            return endpoint.map { "\($0.host):\($0.port)" } ?? "?"
        }

        /// Prints the JSON object a command answers with, with the bundle id and the environment.
        func answer(_ object: [String: Any]) throws {
            var object = object
            object["bundleId"] = bundleId
            object["environment"] = environment
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        }

        /// Runs `body` with a channel manager for the bundle's credential, then prints its JSON answer.
        func run(_ setting: Setting? = nil, _ body: (ChannelManager, APNsEnvironment) async throws -> [String: Any]) async throws {
            let setting = if let setting { setting } else { try await self.setting() }
            let (manager, eventLoops) = makeManager(setting)
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
            case .success(let object):
                try answer(object)
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

        private func makeManager(_ setting: Setting) -> (ChannelManager, APNsEventLoopGroup) {
            var logger = Logger(label: "apns-relay.channels")
            logger.logLevel = .error
            let apns = setting.configuration.apns
            do {
                let eventLoops = try RelayApp.eventLoops(apns)
                return (try RelayApp.channelManager(
                    apns, credential: setting.credential, timeout: .milliseconds(timeoutMs), eventLoops: eventLoops, logger: logger), eventLoops)
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
            abstract: "Delete a channel. Its id is never issued again; broadcasts to it answer ChannelNotRegistered.",
            discussion: """
                Prints what it would delete (environment, bundle id, channel id, management host, credential) on \
                standard error, then deletes with --yes, or once you answer y when run in a terminal. \
                Otherwise nothing is deleted: it prints {"deleted":false,…} and exits 0.
                """)

        @OptionGroup var common: Common

        @Option(help: "The channel's id (base64).")
        var channelId: String

        @Flag(help: "Delete without asking (the plan is printed first either way).")
        var yes = false

        func validate() throws { _ = try ChannelsCommand.channelID(channelId) }

        func run() async throws {
            let id = try ChannelsCommand.channelID(channelId)
            let setting = try await common.setting()
            let host = common.managementHost(setting)
            // No request is made before the answer: the plan comes from the configuration alone.
            FileHandle.standardError.write(Data("""
                delete broadcast channel (never issued again; broadcasts to it answer ChannelNotRegistered):
                  environment: \(common.environment)
                  bundle id: \(common.bundleId)
                  channel id: \(id.base64)
                  management host: \(host) (apns.\(common.environment).managementHost, managementPort)
                  credential: \(setting.credential.name)

                """.utf8))
            if !yes {
                let canAsk = Confirmation.canAsk
                let confirmed = canAsk ? await Confirmation.ask("delete channel \(id.base64) of \(common.bundleId) in \(common.environment)?") : false
                guard confirmed else {
                    FileHandle.standardError.write(Data("nothing deleted\(canAsk ? "" : "; add --yes to delete it")\n".utf8))
                    try common.answer(["channelId": id.base64, "deleted": false, "managementHost": host])
                    return
                }
            }
            try await common.run(setting) { manager, environment in
                try await manager.delete(id, bundleID: common.bundleId, environment: environment)
                return ["channelId": id.base64, "deleted": true, "managementHost": host]
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
