import ArgumentParser
import RelayApp
import ServiceSupport

/// `apns-relay`: the service and its tools.
@main
struct ApnsRelay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-relay",
        abstract: "Relays notification events from Kafka to Apple Push Notification service, at least once.",
        // The product's version first (the chart's appVersion), then the C libraries it runs with.
        version: LinkedLibraries.versionText,
        subcommands: [RunCommand.self, CheckCommand.self, SendCommand.self, ChannelsCommand.self, ReplayCommand.self, ValidateCommand.self, TopicsCommand.self]
    )
}
