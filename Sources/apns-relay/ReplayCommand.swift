import ArgumentParser
import Foundation
import Kafka
import Logging
import RelayApp
import RelayContract

/// `apns-relay replay`: dead letters back to the topic they came from, once the producer bug behind them is
/// fixed — their original bytes, key and headers, without the dead-letter headers.
struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Re-produce dead letters (the original events) to their input topic, filtered.",
        discussion: """
            Reads the dead-letter topic (kafka.topics.deadLetters) from its beginning up to where it ends now, \
            with a throw-away consumer group that commits nothing, and produces each matching dead letter's \
            value, key and headers (without the __connect.errors.* and apns-relay.* headers) to the topic it \
            came from (or --to-topic). A dead letter whose value, key or headers were cut to fit the topic \
            cannot be replayed as it was: it is counted and skipped. --dry-run counts and lists without \
            producing. Exit status: 0 done (or nothing matched), 1 a produce failed, 2 a configuration \
            problem, 64 wrong usage (an unknown option; a --since, --until or --stage that cannot match).
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

    @Option(help: "Produce to this topic instead of each dead letter's original topic.")
    var toTopic: String?

    @Flag(help: "Count and list what would be replayed; produce nothing.")
    var dryRun = false

    @Option(help: "How long to read before giving up, in seconds.")
    var timeoutSeconds = 120

    /// The filters, checked before anything is read (ArgumentParser prints the error with this command's usage).
    func validate() throws {
        _ = try Self.time(since, option: "--since")
        _ = try Self.time(until, option: "--until")
        try Self.checkStages(stage)
    }

    func run() async throws {
        let since = try Self.time(self.since, option: "--since")
        let until = try Self.time(self.until, option: "--until")
        let configuration: RelayAppConfiguration
        do {
            configuration = try RelayAppConfiguration(reader: try await options.sources(), requireCredential: false)
        } catch {
            print("error: \(error)")
            throw ExitCode(2)
        }
        var quiet = Logger(label: "apns-relay.replay")
        quiet.logLevel = .critical
        let logger = quiet
        let kafka = configuration.kafka
        let topic = configuration.relay.topics.deadLetters
        let properties = kafka.properties.merging(kafka.consumerProperties) { $1 }

        // Where the topic ends now: reading stops there, so a relay writing new dead letters meanwhile does
        // not keep this running.
        let watermarks: [Int32: (low: Int64, high: Int64)]
        do {
            watermarks = try await KafkaClusterInspection.watermarks(bootstrapServers: kafka.bootstrapServers, topic: topic, properties: properties, logger: logger)
        } catch {
            print("error: cannot read the dead-letter topic \(topic) (kafka.topics.deadLetters): \(error)")
            throw ExitCode(2)
        }
        var remaining = Set(watermarks.filter { $0.value.high > $0.value.low }.keys)
        let total = watermarks.values.reduce(0) { $0 + Int($1.high - $1.low) }
        print("\(topic): \(total) dead letter(s) in \(watermarks.count) partition(s)\(dryRun ? " (dry run)" : "")")

        var counts = Counts()
        var producer: KafkaProducer?
        if !dryRun && !remaining.isEmpty {
            var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: kafka.bootstrapServers)
            producerConfiguration.clientID = kafka.clientID + "-replay"
            producerConfiguration.additionalProperties = kafka.properties.merging(kafka.producerProperties) { $1 }
            producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
            try producer?.start()
        }
        if !remaining.isEmpty {
            var consumerConfiguration = KafkaConsumerConfiguration(bootstrapServers: kafka.bootstrapServers, groupID: "apns-relay-replay-\(UUID().uuidString.prefix(8))")
            consumerConfiguration.clientID = kafka.clientID + "-replay"
            consumerConfiguration.autoOffsetReset = .earliest
            consumerConfiguration.partitionAssignmentStrategy = kafka.assignmentStrategy
            consumerConfiguration.additionalProperties = properties
            let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
            try consumer.subscribe(topics: [topic])
            try consumer.start()
            var iterator = consumer.events.makeAsyncIterator()
            let deadline = ContinuousClock.now + .seconds(timeoutSeconds)
            reading: while !remaining.isEmpty {
                let left = deadline - .now
                guard left > .zero, let event = try? await iterator.next(within: left) else {
                    print("error: stopped reading after \(timeoutSeconds) s with \(remaining.count) partition(s) not read to their end")
                    counts.incomplete = true
                    break reading
                }
                switch event {
                case .message(let message):
                    guard let mark = watermarks[message.partition], message.offset < mark.high else { continue }
                    if message.offset >= mark.high - 1 { remaining.remove(message.partition) }
                    await handle(message, since: since, until: until, producer: producer, counts: &counts)
                case .partitionsRevoked(let revocation):
                    revocation.acknowledge()
                default:
                    continue
                }
            }
            try? await consumer.close()
        }
        if let producer {
            try? await producer.flush(timeout: .seconds(30))
            try? await producer.close()
        }
        print(counts.summary(dryRun: dryRun))
        if counts.failed > 0 { throw ExitCode(1) }
        if counts.incomplete { throw ExitCode(1) }
    }

    private struct Counts {
        var matched = 0
        var replayed = 0
        var notReplayable = 0
        var failed = 0
        var incomplete = false
        var byReason: [String: Int] = [:]

        func summary(dryRun: Bool) -> String {
            var line = "\(matched) matched, \(dryRun ? "\(replayed) would be replayed" : "\(replayed) replayed"), \(notReplayable) not replayable (cut to fit)"
            if failed > 0 { line += ", \(failed) failed to produce" }
            if !byReason.isEmpty {
                line += "\n" + byReason.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value)" }.joined(separator: "\n")
            }
            return line
        }
    }

    private func handle(
        _ message: KafkaConsumerMessage, since: Int64?, until: Int64?, producer: KafkaProducer?, counts: inout Counts
    ) async {
        func header(_ name: String) -> String? {
            message.headers.first { $0.name == name }?.value.map { String(decoding: $0, as: UTF8.self) }
        }
        let code = header(DeadLetter.Header.errorCode) ?? "?"
        let stage = header(DeadLetter.Header.stage) ?? "?"
        if !reason.isEmpty && !reason.contains(code) { return }
        if !self.stage.isEmpty && !self.stage.contains(stage) { return }
        let time = message.timestampMilliseconds ?? 0
        if let since, time < since { return }
        if let until, time >= until { return }
        counts.matched += 1
        let origin = header(DeadLetter.Header.topic)
        let position = "\(origin ?? "?")[\(header(DeadLetter.Header.partition) ?? "?")]@\(header(DeadLetter.Header.offset) ?? "?")"
        // A cut value, a replaced key or dropped headers would not be the event the producer sent.
        if header(DeadLetter.Header.truncated) != nil || header(DeadLetter.Header.originalKeySize) != nil
            || header(DeadLetter.Header.originalHeadersDropped) != nil
        {
            counts.notReplayable += 1
            print("  skip \(position) \(code): cut to fit the dead-letter topic; not replayable as it was")
            return
        }
        guard let target = toTopic ?? origin else {
            counts.notReplayable += 1
            print("  skip \(message.topic)[\(message.partition)]@\(message.offset): no __connect.errors.topic header and no --to-topic")
            return
        }
        counts.byReason["\(stage)/\(code)", default: 0] += 1
        let headers = message.headers.filter { !$0.name.hasPrefix(DeadLetter.Header.connectPrefix) && !$0.name.hasPrefix(DeadLetter.Header.relayPrefix) }
        guard let producer else {
            counts.replayed += 1
            print("  would replay \(position) \(code) → \(target)")
            return
        }
        do {
            _ = try await producer.send(topic: target, key: message.key.map(Array.init), value: message.value.map(Array.init), headers: headers)
            counts.replayed += 1
        } catch {
            counts.failed += 1
            print("  failed \(position) → \(target): \(error)")
        }
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
