import Foundation
import Kafka
import Logging

extension ReplayCommand {
    /// Reads the dead-letter topic up to fixed ends, each time in a new throw-away consumer group that commits
    /// nothing: the replay reads it twice, once for the plan and once to write what the plan showed.
    struct DeadLetterReader {
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
            reading: while !remaining.isEmpty {
                let left = deadline - .now
                guard left > .zero, let event = try? await iterator.next(within: left) else { break reading }
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
