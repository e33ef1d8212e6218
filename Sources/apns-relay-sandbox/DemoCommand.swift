import APNsCore
import APNsMock
import ArgumentParser
import Foundation
import Kafka
import Logging
import Relay
import RelayApp
import RelaySandbox
import ServiceLifecycle
import ServiceSupport

/// `apns-relay-sandbox demo`: the whole pipeline on one machine, no setup — librdkafka's mock Kafka cluster, the mock
/// APNs (TLS + HTTP/2), a throw-away signing key, a realistic mix of events, and a summary at the end.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the relay end to end against an embedded mock Kafka cluster and mock APNs, then summarise."
    )

    @Option(help: "How many events to send.")
    var events = 5000

    @Option(help: "Relay log level (the demo's own output is always shown).")
    var logLevel: String = "warning"

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = Logger.Level(rawValue: logLevel) ?? .warning
            return handler
        }
        let logger = Logger(label: "apns-relay.demo")
        let say = { @Sendable (line: String) in print(line); fflush(nil) }

        say("apns-relay demo: \(events) events through mock Kafka → relay → mock APNs → result topics\n")
        var options = RelaySandbox.Options()
        options.topics.urgent = [DemoScenario.urgentTopic]
        let sandbox = try await RelaySandbox(options: options, logger: logger)
        let topics = sandbox.options.topics
        say("• mock Kafka cluster at \(sandbox.bootstrapServers), topics: \(topics.input[0]) (bulk lane) and \(topics.urgent[0]) (urgent lane) → \(topics.results), \(topics.removedTokens), \(topics.removedChannels), \(topics.deadLetters)")
        say("• mock APNs (TLS, HTTP/2, ES256 tokens verified, strict fleet mode) on 127.0.0.1:\(sandbox.apnsPort)")
        say("• throw-away signing key \(sandbox.keyID) for team \(sandbox.teamID)")

        let configuration = try await sandbox.relayConfiguration(groupID: "apns-relay-demo")
        let channels = try await DemoChannels.create(configuration, environment: sandbox.options.apnsEnvironment, logger: logger)
        say("• broadcast channels made through the management API (port \(sandbox.managementPort)) for \(channels.bundleID): \(channels.stored) (stores the latest message), \(channels.unstored) (stores none), and \(channels.deleted), deleted again")

        let now = Int64(Date().timeIntervalSince1970)
        let scenario = DemoScenario.make(count: events, nowSeconds: now, channels: channels)
        scenario.arm(sandbox.apns)
        say("• armed: \(scenario.unregistered.count) gone tokens, \(scenario.wrongEnvironment.count) wrong-environment tokens, a burst of \(scenario.serviceUnavailableBurst) APNs 503s")

        let produceStart = ContinuousClock.now
        try await sandbox.produce(scenario.events.map { (key: $0.key, value: $0.value) })
        say("• produced \(scenario.events.count) events in \(format(ContinuousClock.now - produceStart))\n")

        let app = try RelayApp(configuration: configuration, logger: logger)
        let group = app.serviceGroup(logger: logger)
        let reader = try OutputReader(sandbox: sandbox, logger: logger)
        let relayStart = ContinuousClock.now
        async let running: Void = group.run()

        let results = sandbox.options.topics.results
        let total = scenario.allEvents.count
        let progress = ProgressLine(total: total)
        // Once a tenth of the bulk backlog has results, the urgent events come, as a login code would in the
        // middle of a campaign.
        let backlogDraining = Latch<Void>()
        let urgentProducer = Task {
            guard await backlogDraining.wait(timeout: .seconds(300)) != nil else { return }
            try await sandbox.produce(scenario.urgent.map { (key: $0.key, value: $0.value) }, to: DemoScenario.urgentTopic)
            say("\n• \(scenario.urgent.count) urgent sign-in codes produced to \(DemoScenario.urgentTopic) while the bulk backlog drains")
        }
        let consumer = app.consumer
        say("• relay started: joining consumer group 'apns-relay-demo' (librdkafka's mock takes a few seconds)…")
        var joined = false
        let records = try await reader.collect(timeout: .seconds(300)) { records in
            if !joined, consumer.health.isJoined {
                joined = true
                say("• joined the group; relaying")
            }
            let done = records.lazy.filter { $0.topic == results }.count
            if joined || done > 0 { progress.update(done) }
            if done >= scenario.events.count / 10 { backlogDraining.set() }
            return done >= total
        }
        try await urgentProducer.value
        let elapsed = ContinuousClock.now - relayStart
        progress.finish()
        await group.triggerGracefulShutdown()
        try await running
        await reader.close()

        let summary = DemoSummary(scenario: scenario, records: records, topics: sandbox.options.topics, elapsed: elapsed, apns: sandbox.apns.statistics)
        say(summary.text)
        await sandbox.stop()
        if !summary.problems.isEmpty {
            say("PROBLEMS:\n" + summary.problems.map { "  - " + $0 }.joined(separator: "\n"))
            say("\nFAIL: \(summary.problems.count) problem(s) above")
            throw ExitCode(1)
        }
        say("\nPASS: every one of the \(scenario.events.count) bulk and \(scenario.urgent.count) urgent events got a result with the outcome its scenario expects")
    }
}

/// A progress line, rewritten in place at most a few times a second.
final class ProgressLine {
    private let total: Int
    private let interactive = isatty(STDOUT_FILENO) != 0
    private var lastPrinted = ContinuousClock.now - .seconds(5)

    init(total: Int) { self.total = total }

    func update(_ done: Int) {
        // A terminal gets one line rewritten in place; a log gets a line every two seconds.
        let interval: Duration = interactive ? .milliseconds(250) : .seconds(2)
        guard ContinuousClock.now - lastPrinted > interval || done == total else { return }
        lastPrinted = .now
        let width = 30
        let filled = total == 0 ? width : done * width / total
        let bar = "  results: [\(String(repeating: "#", count: filled))\(String(repeating: ".", count: width - filled))] \(done)/\(total)"
        if interactive { print("\r" + bar, terminator: "") } else { print(bar) }
        fflush(nil)
    }

    func finish() { print(interactive ? "\n" : "") }
}

func format(_ duration: Duration) -> String {
    String(format: "%.2f s", duration.seconds)
}
