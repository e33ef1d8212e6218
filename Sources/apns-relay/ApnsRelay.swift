import ArgumentParser
import ServiceSupport

/// `apns-relay`: the service and its tools.
@main
struct ApnsRelay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-relay",
        abstract: "Relays notification events from Kafka to Apple Push Notification service, at least once.",
        version: ProductVersion.string,
        subcommands: [RunCommand.self, CheckCommand.self, SendCommand.self, ChannelsCommand.self, ReplayCommand.self, ValidateCommand.self]
    )
}
