import Kafka
import Logging
import Synchronization

/// Produces events to the sandbox's input topic (or another) at a steady pace through one long-lived producer, until told
/// to stop — the "stream of events" that fault runs inject their faults into.
package final class EventStream: Sendable {
    private let producer: KafkaProducer
    private let topic: String
    private let stopped = Atomic<Bool>(false)

    package init(sandbox: RelaySandbox, topic: String? = nil, logger: Logger) throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: [sandbox.bootstrapServers])
        configuration.clientID = "sandbox-stream"
        producer = try KafkaProducer(configuration: configuration, logger: logger)
        try producer.start()
        self.topic = topic ?? sandbox.options.inputTopic
    }

    /// Sends `event(0)`, `event(1)`, … in batches of `batch`, one batch per `interval`, each batch
    /// acknowledged by Kafka before the next, until ``stop()`` is called or `limit` events were sent.
    /// - Returns: how many events were sent (all of them acknowledged): exactly `event(0..<n)`.
    package func run(
        batch: Int, interval: Duration, limit: Int = .max,
        event: @Sendable (Int) -> (key: String, value: [UInt8])
    ) async throws -> Int {
        var sent = 0
        while !stopped.load(ordering: .relaxed) && sent < limit {
            let next = ContinuousClock.now + interval
            let end = min(sent + batch, limit)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in sent..<end {
                    let (key, value) = event(n)
                    group.addTask { [producer, topic] in
                        _ = try await producer.send(topic: topic, key: Array(key.utf8), value: value)
                    }
                }
                try await group.waitForAll()
            }
            sent = end
            // Paces the stream (events per interval); not a wait for anything.
            try await Task.sleep(until: next)
        }
        return sent
    }

    /// Makes ``run(batch:interval:limit:event:)`` return after its current batch.
    package func stop() { stopped.store(true, ordering: .relaxed) }

    package func close() async {
        try? await producer.close(timeout: .seconds(10))
    }
}
