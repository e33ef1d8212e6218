import Foundation
import Kafka
import Logging

extension ReplayCommand {
    /// Reads the dead-letter topic up to fixed ends, each time in a new throw-away consumer group that commits
    /// nothing: the replay reads it twice, once for the plan and once to write what the plan showed.
    struct DeadLetterReader {
        /// How long the consumer has nothing to hand out before the reader looks at its positions.
        static let quiet = Duration.milliseconds(500)
        /// The consumer's settings; its group id is replaced by a fresh one for every read.
        var configuration: KafkaConsumerConfiguration
        let topic: String
        let logger: Logger

        /// Hands every record below `ends` to `body`, from each partition's start.
        /// - Parameter ends: per partition, the offset after the last record to read (give only partitions that
        ///   have one); other partitions are not waited for, their records are ignored.
        /// - Returns: the partitions not read to their end when `timeout` passed (empty: all were).
        func read(
            until ends: [Int32: Int64], timeout: Duration, _ body: (KafkaConsumerMessage) async -> Void
        ) async throws -> Set<Int32> {
            var remaining = Set(ends.keys)
            guard !remaining.isEmpty else { return [] }
            var configuration = configuration
            configuration.groupID = "apns-relay-replay-\(UUID().uuidString.prefix(8))"
            configuration.autoOffsetReset = .earliest
            let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
            try consumer.subscribe(topics: [topic])
            try consumer.start()
            var iterator = consumer.events.makeAsyncIterator()
            let deadline = ContinuousClock.now + timeout
            // Partitions whose position had passed their end at the last quiet moment (a topic written in
            // transactions ends in a commit marker, never handed out: see `KafkaConsumer.positions(of:)`).
            // One more quiet moment after that reading and whatever librdkafka had handed out by then has
            // come through the consumer's buffer.
            var passed: Set<Int32> = []
            reading: while !remaining.isEmpty {
                let left = deadline - .now
                guard left > .zero, let event = try? await iterator.next(within: min(left, Self.quiet)) else {
                    guard deadline - .now > .zero else { break reading }
                    remaining.subtract(passed)
                    let positions = (try? consumer.positions(of: remaining.map { KafkaTopicPartition(topic: topic, partition: $0) })) ?? [:]
                    passed = Set(remaining.filter { partition in
                        guard let end = ends[partition], let position = positions[KafkaTopicPartition(topic: topic, partition: partition)] ?? nil else { return false }
                        return position >= end
                    })
                    continue
                }
                switch event {
                case .message(let message):
                    guard let end = ends[message.partition], message.offset < end else { continue }
                    if message.offset >= end - 1 { remaining.remove(message.partition) }
                    await body(message)
                case .partitionsRevoked(let revocation):
                    revocation.acknowledge()
                case .partitionsAssigned, .partitionsLost:
                    continue
                }
            }
            try? await consumer.close()
            return remaining
        }
    }
}
