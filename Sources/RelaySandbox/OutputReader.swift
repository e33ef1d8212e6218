import Foundation
import Kafka
import Logging
import Relay
import ServiceSupport
import Synchronization

/// Reads what the relay wrote (results, removed tokens, dead letters) from the sandbox's topics, in its
/// own consumer group, until a condition holds or a deadline passes.
package final class OutputReader: Sendable {
    /// One record read back.
    package struct Record: Sendable {
        package var topic: String
        package var key: [UInt8]?
        package var value: [UInt8]
        package var headers: [KafkaHeader]
        /// Where it is in its topic.
        package var partition: Int32
        package var offset: Int64
        /// The value parsed as a JSON object (results and removed tokens); `nil` for dead letters.
        package var json: [String: any Sendable]? {
            (try? JSONSerialization.jsonObject(with: Data(value))) as? [String: any Sendable]
        }
    }

    private let consumer: KafkaConsumer
    private let topics: RelayConfiguration.Topics
    private let bootstrapServers: String
    private let logger: Logger
    /// The highest offset read so far per topic and partition (what `readToEnd` compares with the ends).
    private let highestOffsets = Mutex<[String: [Int32: Int64]]>([:])
    /// Positions read so far: a record delivered twice by the consumer (librdkafka redelivers after some
    /// leader changes) is one record in the topic, not a duplicate written by the relay.
    private let seen = Mutex<Set<Position>>([])
    private let redeliveryCount = Atomic<Int>(0)

    private struct Position: Hashable {
        var topic: String
        var partition: Int32
        var offset: Int64
    }

    /// Records the consumer delivered more than once (dropped from what `collect` returns).
    package var redeliveries: Int { redeliveryCount.load(ordering: .relaxed) }

    /// - Parameters:
    ///   - alsoReading: more topics to read from their start (e.g. the input, to diagnose a loss).
    ///   - readUncommitted: read records of open and aborted transactions too (`isolation.level`
    ///     `read_uncommitted`); by default only committed ones, as librdkafka does.
    ///   - fetchWait: `fetch.wait.max.ms`, for a latency measurement on librdkafka's mock broker (which holds a
    ///     fetch that found nothing that long, where Kafka answers when data arrives); librdkafka's default if nil.
    package init(
        sandbox: RelaySandbox, logger: Logger, alsoReading extra: [String] = [], readUncommitted: Bool = false, fetchWait: Duration? = nil
    ) throws {
        topics = sandbox.options.topics
        bootstrapServers = sandbox.bootstrapServers
        self.logger = logger
        var configuration = KafkaConsumerConfiguration(
            bootstrapServers: [sandbox.bootstrapServers], groupID: "output-reader-\(UUID().uuidString)"
        )
        configuration.sessionTimeout = .seconds(6)
        configuration.additionalProperties["isolation.level"] = readUncommitted ? "read_uncommitted" : "read_committed"
        if let fetchWait { configuration.additionalProperties["fetch.wait.max.ms"] = String(fetchWait.milliseconds) }
        consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        try consumer.subscribe(topics: topics.outputs + extra)
        try consumer.start()
    }

    /// Collects records until `done` says so.
    /// - Throws: `RelayError` naming what was still missing when `timeout` passed.
    package func collect(
        timeout: Duration, progress: (@Sendable (Int) -> Void)? = nil,
        until done: ([Record]) -> Bool
    ) async throws -> [Record] {
        var records: [Record] = []
        guard try await gather(into: &records, timeout: timeout, progress: progress, until: done) else {
            throw RelayError("timed out after \(timeout) with \(records.count) output records")
        }
        return records
    }

    /// Everything that arrives within `duration`.
    package func read(for duration: Duration) async throws -> [Record] {
        var records: [Record] = []
        _ = try await gather(into: &records, timeout: duration, progress: nil) { _ in false }
        return records
    }

    /// The records after those already returned, up to the end of `topic` as its partition leaders see it when
    /// this is called: for a check that nothing more was written (a duplicate after the last expected record),
    /// once the writer has stopped. Every partition's last record has then been read.
    /// - Throws: `RelayError` when `timeout` passes first.
    package func readToEnd(of topic: String, timeout: Duration) async throws -> [Record] {
        let ends = try await KafkaClusterInspection.watermarks(bootstrapServers: [bootstrapServers], topic: topic, logger: logger)
        func reachedTheEnd() -> Bool {
            self.highestOffsets.withLock { read in
                ends.allSatisfy { partition, marks in marks.high <= marks.low || (read[topic]?[partition] ?? -1) >= marks.high - 1 }
            }
        }
        var records: [Record] = []
        guard try await gather(into: &records, timeout: timeout, progress: nil, until: { _ in reachedTheEnd() }) else {
            throw RelayError("\(topic) not read to its end \(ends.mapValues(\.high)) within \(timeout)")
        }
        return records
    }

    /// The records after those already returned, up to a sentinel record written now at the end of each of
    /// `topic`'s partitions: `readToEnd` for topics written in transactions, whose partitions end in control
    /// markers no reader is given (and a `read_committed` reader stops before an open transaction). The
    /// sentinels (keys starting `sentinel-`, any reader's) are not returned.
    /// - Throws: `RelayError` when `timeout` passes first.
    package func readPastSentinels(of topic: String, timeout: Duration) async throws -> [Record] {
        let ends = try await KafkaClusterInspection.watermarks(bootstrapServers: [bootstrapServers], topic: topic, logger: logger)
        let sentinel = "sentinel-\(UUID().uuidString)"
        var configuration = KafkaProducerConfiguration(bootstrapServers: [bootstrapServers])
        configuration.clientID = "output-reader-sentinels"
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        try producer.start()
        var sentinelOffsets: [Int32: Int64] = [:]
        for partition in ends.keys {
            sentinelOffsets[partition] = try await producer.send(topic: topic, key: sentinel, value: "{}", partition: partition).offset
        }
        try await producer.close(timeout: .seconds(10))
        var records: [Record] = []
        let found = try await gather(into: &records, timeout: timeout, progress: nil) { records in
            records.lazy.filter { $0.topic == topic && $0.key == Array(sentinel.utf8) }.count >= ends.count
        }
        guard found else {
            // Where each partition's reading stopped: short of its sentinel by a few records when a transaction
            // was left open (a read_committed reader stops before it), not at all when nothing came.
            let read = highestOffsets.withLock { $0[topic] ?? [:] }
            let found = Set(records.filter { $0.topic == topic && $0.key == Array(sentinel.utf8) }.map(\.partition))
            let missing = sentinelOffsets.keys.sorted().filter { !found.contains($0) }
                .map { "partition \($0): read up to offset \(read[$0].map(String.init) ?? "none"), sentinel at \(sentinelOffsets[$0]!)" }
            throw RelayError("\(topic): not every partition's sentinel read within \(timeout) (\(missing.joined(separator: "; ")))")
        }
        return records.filter { !($0.key.map { String(decoding: $0, as: UTF8.self).hasPrefix("sentinel-") } ?? false) }
    }

    /// - Returns: `false` when `timeout` passed before `done` held.
    private func gather(
        into records: inout [Record], timeout: Duration, progress: (@Sendable (Int) -> Void)?, until done: ([Record]) -> Bool
    ) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        var iterator = consumer.events.makeAsyncIterator()
        while !done(records) {
            let remaining = deadline - .now
            guard remaining > .zero else { return false }
            let event: KafkaConsumerEvent
            do {
                guard let next = try await iterator.next(within: min(remaining, .seconds(1))) else {
                    throw RelayError("the output reader's consumer closed")
                }
                event = next
            } catch let error as KafkaError where error.code == .timedOut {
                continue
            }
            switch event {
            case .message(let message):
                guard let value = message.value else { continue }
                let position = Position(topic: message.topic, partition: message.partition, offset: message.offset)
                guard seen.withLock({ $0.insert(position).inserted }) else {
                    redeliveryCount.add(1, ordering: .relaxed)
                    continue
                }
                highestOffsets.withLock { read in
                    read[message.topic, default: [:]][message.partition] = max(read[message.topic]?[message.partition] ?? -1, message.offset)
                }
                records.append(Record(
                    topic: message.topic, key: message.key.map(Array.init), value: Array(value), headers: message.headers,
                    partition: message.partition, offset: message.offset
                ))
                progress?(records.count)
            case .partitionsRevoked(let revocation):
                revocation.acknowledge()
            case .partitionsAssigned, .partitionsLost:
                break
            }
        }
        return true
    }

    /// Results only, until `count` of them arrived.
    package func results(count: Int, timeout: Duration) async throws -> [Record] {
        let results = topics.results
        return try await collect(timeout: timeout) { $0.lazy.filter { $0.topic == results }.count >= count }
    }

    package func close() async {
        try? await consumer.close(timeout: .seconds(5))
    }
}
