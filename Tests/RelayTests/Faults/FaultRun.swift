import Foundation
import Logging
import RelaySandbox
import Testing

/// Fault-injection runs: each drives the real pipeline (mock Kafka → relay → mock APNs → result topics)
/// through one kind of trouble, then checks the at-least-once invariant — every input event has at least
/// one terminal result — and that duplicates stay within the bound the run's configuration allows
/// (`DuplicateBound`: in-flight limit, APNs answer time, commit and heartbeat intervals, members, and what
/// the run feeds), never one derived from what the run measured.
///
/// `make test` runs the reduced form (a few minutes in total); `make faults` sets `APNS_RELAY_FAULTS=full`.
/// Each run prints one line: `fault <name>: events N, kills K, faults F, lost L, duplicates D (bound B)`.
/// Serialized: the runs share two cores with each other and with the rest of the suite.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct FaultTests {
    /// Critical only: the runs provoke thousands of expected notices and errors (GOAWAYs, broker timeouts);
    /// the checks at the end of each run decide, and the relay processes keep their own logs.
    /// `APNS_RELAY_FAULTS_LOG=info` (or any level) shows the in-process relay's log when hunting a failure.
    let logger = {
        var logger = Logger(label: "faults")
        logger.logLevel = ProcessInfo.processInfo.environment["APNS_RELAY_FAULTS_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return logger
    }()
}

enum FaultSize {
    /// `APNS_RELAY_FAULTS=full` (what `make faults` sets) selects the full sizes.
    static let full = ProcessInfo.processInfo.environment["APNS_RELAY_FAULTS"] == "full"

    /// `reduced` in `make test`, `full` in `make faults`.
    static func pick<T>(reduced: T, full: T) -> T { Self.full ? full : reduced }

    /// `APNS_RELAY_FAULTS_SEED` replays a run; otherwise a fresh seed (printed by the runs that use it).
    static func seed() -> UInt64 {
        if let text = ProcessInfo.processInfo.environment["APNS_RELAY_FAULTS_SEED"], let seed = UInt64(text) { return seed }
        return UInt64.random(in: 1...UInt64(UInt32.max))
    }
}

/// Keyed sample events `prefix0…` for a run; the key is what the result is keyed by.
func faultEvents(_ range: Range<Int>, prefix: String, payloadBytes: Int? = nil) -> [(key: String, value: [UInt8])] {
    range.map { n in
        let payload = payloadBytes.map { SampleEvents.payload(bytes: $0) } ?? #"{"aps":{"alert":{"title":"Hello","body":"World"}}}"#
        return (key: "\(prefix)\(n)", value: SampleEvents.event(id: "\(prefix)\(n)", deviceToken: SampleEvents.token(n), payload: payload))
    }
}

/// The urgent lane's topic in the runs that use both lanes (`kafka.topics.urgent`).
let faultUrgentTopic = "apns-notifications-urgent"

/// Checks the invariant and prints the run's line.
/// - Parameter duplicateBound: the most duplicate results the run's disruptions can explain.
func finishFaultRun(
    _ name: String, tally: ResultTally, expected: Set<String>, kills: Int = 0, faults: Int, duplicateBound: Int,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let lost = tally.missing(expected)
    let strangers = tally.resultsByKey.keys.filter { !expected.contains($0) }
    print("fault \(name): events \(expected.count), kills \(kills), faults \(faults), lost \(lost.count), duplicates \(tally.duplicates) (bound \(duplicateBound))"
        + "  [outcomes \(tally.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))]")
    #expect(lost.isEmpty, "\(name): \(lost.count) events without a result, e.g. \(lost.sorted().prefix(5))", sourceLocation: sourceLocation)
    #expect(strangers.isEmpty, "\(name): results for keys never produced: \(strangers.prefix(5))", sourceLocation: sourceLocation)
    #expect(tally.duplicates <= duplicateBound, "\(name): \(tally.duplicates) duplicates > bound \(duplicateBound)", sourceLocation: sourceLocation)
}

/// Produces `events` in `batches` batches, `spacing` apart, so input keeps arriving while faults happen.
func produceSpread(
    _ sandbox: RelaySandbox, _ events: [(key: String, value: [UInt8])], batches: Int, spacing: Duration, to topic: String? = nil
) async throws {
    let size = max(1, (events.count + batches - 1) / batches)
    for (index, start) in stride(from: 0, to: events.count, by: size).enumerated() {
        // Spaces the input in time (a stream, not one backlog); nothing waits on this sleep.
        if index > 0 { try await Task.sleep(for: spacing) }
        try await sandbox.produce(Array(events[start..<min(start + size, events.count)]), to: topic)
    }
}

/// Where events without a result went, read afresh from the start of the input and results topics: not in
/// the input (the producer lost it), in the input with no result (the relay skipped or lost it), or with a
/// result (the test's reader missed it). For a failure message: a lost event says where it was lost.
func diagnoseMissing(_ keys: [String], sandbox: RelaySandbox, logger: Logger) async -> String {
    guard !keys.isEmpty else { return "" }
    do {
        let reader = try OutputReader(sandbox: sandbox, logger: logger, alsoReading: sandbox.options.topics.input)
        let records = try await reader.read(for: .seconds(15))
        await reader.close()
        let input = Set(sandbox.options.topics.input)
        // A result names its event's position; one found there under another key would be a key mix-up.
        func sourcePosition(_ record: OutputReader.Record) -> String? {
            guard let source = record.json?["source"] as? [String: any Sendable],
                  let topic = source["topic"] as? String, let partition = source["partition"] as? Int,
                  let offset = source["offset"] as? Int else { return nil }
            return "\(topic)[\(partition)]@\(offset)"
        }
        let resultsByPosition = Dictionary(grouping: records.filter { $0.topic == sandbox.options.topics.results }) { sourcePosition($0) ?? "?" }
        return keys.sorted().prefix(10).map { key in
            let mine = records.filter { $0.keyString == key }
            let inputs = mine.filter { input.contains($0.topic) }.map { "\($0.topic)[\($0.partition)]@\($0.offset)" }
            let results = mine.filter { $0.topic == sandbox.options.topics.results }.map { "[\($0.partition)]@\($0.offset)" }
            if inputs.isEmpty { return "\(key): not in the input topic (the producer lost it)" }
            if results.isEmpty {
                let atPosition = inputs.flatMap { resultsByPosition[$0] ?? [] }.map { "key \($0.keyString) at results[\($0.partition)]@\($0.offset)" }
                return "\(key): input at \(inputs), no result record under its key (the relay skipped or lost it); results naming its position: \(atPosition)"
            }
            return "\(key): input at \(inputs), result at \(results) (the test's reader missed it)"
        }.joined(separator: "; ") + " — \(records.count) records read afresh"
    } catch {
        return "no diagnosis: \(error)"
    }
}
