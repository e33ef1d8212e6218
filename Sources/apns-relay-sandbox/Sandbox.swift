import ArgumentParser
import ServiceSupport

/// `apns-relay-sandbox`: the relay's tools that run mocks — the demo and a mock Kafka cluster. Kept out of
/// the production `apns-relay`, which then links neither the mock APNs (nor its HTTP/2 server stack) nor the
/// in-process sandbox.
@main
struct ApnsRelaySandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-relay-sandbox",
        abstract: "Try apns-relay without Kafka or APNs: the whole pipeline on mocks, or a mock Kafka cluster.",
        version: ProductVersion.string,
        subcommands: [DemoCommand.self, MockKafkaCommand.self]
    )
}
