import ArgumentParser
import Foundation
import Kafka
import Logging
import RelayApp
import RelayContract

/// `apns-relay replay`: dead letters back to the input topic they came from, once the producer bug behind them
/// is fixed — their original bytes, key and headers, without the dead-letter headers.
///
/// It writes with the relay's credentials, so it trusts only the relay's own block of dead-letter headers (the
/// producer's are kept under `__original.`) and writes only to the relay's input topics; and it shows what it
/// would write before it writes anything.
struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Re-produce dead letters (the original events) to their input topic, filtered.",
        discussion: """
            Reads the dead-letter topic (kafka.topics.deadLetters) from its beginning up to where it ends now, \
            with a throw-away consumer group that commits nothing, and prints the plan: the cluster, the source \
            and its filters, and how many matching dead letters it would write to each topic. With --yes (or \
            once you answer y when run in a terminal) it reads the topic again and produces exactly \
            those: each one's value, key and the event's own headers (without the __connect.* and apns-relay.* \
            ones) to the topic it came from (or --to-topic). It writes only to the relay's input topics \
            (kafka.topics.input and kafka.topics.urgent): a dead letter naming another topic is refused, and so \
            is one with more than one header of a relay name (written before original headers were kept under \
            __original.). A dead letter whose value, key or headers were cut to fit the topic cannot be replayed \
            as it was: it is counted and skipped. --dry-run prints the plan and never asks. Exit status: 0 done \
            (or nothing matched, or nothing written without --yes), 1 a produce failed or the topic was not read \
            to its end, 2 a configuration problem, 64 wrong usage (an unknown option; a --since, --until or \
            --stage that cannot match; a --to-topic that is not an input topic).
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(help: "Only dead letters with this error code (__connect.errors.exception.class.name, e.g. schema_violation); repeatable.")
    var reason: [String] = []

    @Option(help: "Only dead letters of this stage: size, schema or apns-rules (the __connect.errors.stage header); repeatable.")
    var stage: [String] = []

    @Option(help: "Only dead letters written at or after this time (UNIX milliseconds or ISO 8601).")
    var since: String?

    @Option(help: "Only dead letters written before this time (UNIX milliseconds or ISO 8601).")
    var until: String?

    @Option(help: "Produce to this input topic (kafka.topics.input or kafka.topics.urgent) instead of each dead letter's own.")
    var toTopic: String?

    @Flag(help: "Print the plan (counts and a list); produce nothing, ask nothing.")
    var dryRun = false

    @Flag(help: "Produce what the plan shows without asking. Without it a terminal is asked, and otherwise nothing is written.")
    var yes = false

    @Option(help: "How long each read of the dead-letter topic may take, in seconds.")
    var timeoutSeconds = 120

    /// The filters, checked before anything is read (ArgumentParser prints the error with this command's usage).
    func validate() throws {
        _ = try Self.time(since, option: "--since")
        _ = try Self.time(until, option: "--until")
        try Self.checkStages(stage)
        if dryRun && yes { throw ValidationError("--dry-run writes nothing and --yes writes without asking: give one of them") }
    }

    func run() async throws {
        let configuration: RelayAppConfiguration
        do {
            configuration = try RelayAppConfiguration(reader: try await options.sources(), requireCredential: false)
        } catch {
            print("error: \(error)")
            throw ExitCode(2)
        }
        let topics = configuration.relay.topics
        let rules = Rules(
            reasons: reason, stages: stage, since: try Self.time(since, option: "--since"), until: try Self.time(until, option: "--until"),
            toTopic: toTopic, inputs: topics.inputs)
        if let toTopic, !rules.inputs.contains(toTopic) {
            print("error: --to-topic \(toTopic) is not an input topic of this relay: replay writes only to \(Rules.describe(rules.inputs))")
            throw ExitCode(64)
        }
        var quiet = Logger(label: "apns-relay.replay")
        quiet.logLevel = .critical
        let logger = quiet
        let kafka = configuration.kafka
        let topic = topics.deadLetters
        let connection = try RelayApp.connectionProperties(kafka)
        let properties = connection.merging(kafka.consumerProperties) { $1 }

        // Where the topic ends now: reading stops there, so a relay writing new dead letters meanwhile does
        // not keep this running.
        let watermarks: [Int32: (low: Int64, high: Int64)]
        do {
            watermarks = try await KafkaClusterInspection.watermarks(bootstrapServers: kafka.bootstrapServers, topic: topic, properties: properties, logger: logger)
        } catch {
            print("error: cannot read the dead-letter topic \(topic) (kafka.topics.deadLetters): \(error)")
            throw ExitCode(2)
        }
        let total = watermarks.values.reduce(0) { $0 + Int($1.high - $1.low) }
        let cluster = kafka.bootstrapServers.joined(separator: ",")
        print("cluster: \(cluster) (kafka.bootstrapServers)")
        print("source: \(topic) (kafka.topics.deadLetters), \(total) dead letter(s) in \(watermarks.count) partition(s); "
            + "filters: \(filters)")

        var consumerConfiguration = KafkaConsumerConfiguration(bootstrapServers: kafka.bootstrapServers, groupID: "apns-relay-replay")
        consumerConfiguration.clientID = kafka.clientID + "-replay"
        consumerConfiguration.partitionAssignmentStrategy = kafka.assignmentStrategy
        consumerConfiguration.additionalProperties = properties
        let reader = DeadLetterReader(configuration: consumerConfiguration, topic: topic, logger: logger)
        let ends = watermarks.filter { $0.value.high > $0.value.low }.mapValues(\.high)
        let (plan, complete) = try await plan(reading: reader, until: ends, rules: rules)
        if !plan.targets.isEmpty, await confirmed(plan, cluster: cluster) {
            var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: kafka.bootstrapServers)
            producerConfiguration.clientID = kafka.clientID + "-replay"
            producerConfiguration.additionalProperties = connection.merging(kafka.producerProperties) { $1 }
            let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
            try producer.start()
            try await write(plan, reading: reader, producer: producer)
        }
        if !complete { throw ExitCode(1) }
    }

    /// The first read: every dead letter decided, the plan printed.
    /// - Returns: the plan, and whether the topic was read to its end. A plan of part of the topic is still a
    ///   plan of what it shows (and written as such), when the read timed out.
    private func plan(
        reading reader: DeadLetterReader, until ends: [Int32: Int64], rules: Rules
    ) async throws -> (Plan, complete: Bool) {
        var plan = Plan()
        let unread = try await reader.read(until: ends, timeout: .seconds(timeoutSeconds)) { message in
            if let line = plan.add(message, rules: rules) { print(line) }
        }
        if plan.unlisted > 0 { print("  … and \(plan.unlisted) more to replay (the counts below are complete)") }
        let destination = toTopic == nil ? "each dead letter's own topic" : "--to-topic"
        print("targets (\(destination); only \(Rules.describe(rules.inputs))):")
        for (target, count) in plan.byTarget.sorted(by: { $0.key < $1.key }) { print("  \(target): \(count) dead letter(s)") }
        if plan.byTarget.isEmpty { print("  none") }
        print(plan.summary())
        if !unread.isEmpty {
            print("error: stopped reading after \(timeoutSeconds) s with \(unread.count) partition(s) not read to their end; "
                + "the plan covers what was read")
        }
        return (plan, unread.isEmpty)
    }

    /// Whether to write the plan: `--yes`, or a `y` from whoever sits at the terminal; never for `--dry-run` nor
    /// when nobody can be asked (a script, a job), which is told how to go on.
    private func confirmed(_ plan: Plan, cluster: String) async -> Bool {
        if dryRun {
            print("dry run: nothing written")
            return false
        }
        if yes { return true }
        guard Confirmation.canAsk else {
            print("nothing written; add --yes to write them")
            return false
        }
        let counts = plan.byTarget.sorted { $0.key < $1.key }.map { "\($0.value) dead letter(s) to \($0.key)" }
        guard await Confirmation.ask("write \(counts.joined(separator: ", ")) on cluster \(cluster)?") else {
            print("nothing written")
            return false
        }
        return true
    }

    /// The second read: exactly the planned dead letters, each to its planned target.
    /// - Throws: `ExitCode(1)` when a produce failed or a planned dead letter was not found again.
    private func write(_ plan: Plan, reading reader: DeadLetterReader, producer: KafkaProducer) async throws {
        var replayed = 0
        var failed = 0
        let unread = try await reader.read(until: plan.ends, timeout: .seconds(timeoutSeconds)) { message in
            guard let target = plan.targets[Position(message)] else { return }
            let letter = DeadLetterHeaders(message.headers.map { RecordHeader(name: $0.name, value: $0.value) })
            let headers = letter.originals.map { KafkaHeader(name: $0.name, value: $0.value) }
            do {
                _ = try await producer.send(
                    topic: target, key: message.key.map(Array.init), value: message.value.map(Array.init), headers: headers)
                replayed += 1
            } catch {
                failed += 1
                print("  failed \(letter.position) → \(target): \(error)")
            }
        }
        try? await producer.flush(timeout: .seconds(30))
        try? await producer.close()
        if !unread.isEmpty {
            print("error: stopped reading after \(timeoutSeconds) s with \(unread.count) partition(s) not read to their last "
                + "planned dead letter")
        }
        // Planned but not read again: deleted by retention in between, or the read timed out.
        let missing = plan.targets.count - replayed - failed
        print(plan.summary(replayed: replayed, failed: failed, missing: missing))
        if failed > 0 || missing > 0 { throw ExitCode(1) }
    }

    /// The filters as given, for the plan.
    private var filters: String {
        let given = reason.map { "--reason \($0)" } + stage.map { "--stage \($0)" }
            + [since.map { "--since \($0)" }, until.map { "--until \($0)" }].compactMap { $0 }
        return given.isEmpty ? "none (every dead letter)" : given.joined(separator: " ")
    }

    /// `--stage` values, each one a dead letter's stage header can hold: a filter that can match nothing is a
    /// usage error, not a replay of nothing.
    static func checkStages(_ values: [String]) throws {
        let known = DeadLetter.Stage.allCases.map(\.rawValue)
        for value in values where !known.contains(value) {
            throw ValidationError("--stage wants one of \(known.joined(separator: ", ")), got '\(value)'")
        }
    }

    /// UNIX milliseconds or an ISO 8601 date-time, as UNIX milliseconds.
    static func time(_ text: String?, option: String) throws -> Int64? {
        guard let text else { return nil }
        if let milliseconds = Int64(text) { return milliseconds }
        let formatter = ISO8601DateFormatter()
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime, .withFractionalSeconds], [.withInternetDateTime]] {
            formatter.formatOptions = options
            if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1000) }
        }
        throw ValidationError("\(option) wants UNIX milliseconds or an ISO 8601 date-time such as 2026-11-23T10:00:00Z, got '\(text)'")
    }
}
