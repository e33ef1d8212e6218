import Kafka
import RelaySandbox

extension RelaySandbox {
    /// Produces `events` to the input topic, then checks that the mock cluster still holds all of them.
    ///
    /// librdkafka's mock cluster keeps at most 5 MiB (and 100,000 batches) per partition and deletes the
    /// oldest batches beyond that, so a backlog too big for its partitions loses its start before the relay
    /// reads it; the relay then never sees those events and the run waits for their results until its
    /// timeout (400k events of 476 B on 32 partitions did: 311,740 output records, then 900 s of nothing).
    func produceKept(_ events: [(key: String, value: [UInt8])]) async throws {
        try await produce(events)
        let watermarks = try await KafkaClusterInspection.watermarks(
            bootstrapServers: [bootstrapServers], topic: options.inputTopic, logger: logger)
        let pruned = watermarks.filter { $0.value.low > 0 }
        guard pruned.isEmpty else {
            let lost = pruned.values.reduce(0) { $0 + $1.low }
            let bytes = events.reduce(0) { $0 + $1.value.count } / max(1, options.partitions)
            throw BenchmarkError("""
                the mock cluster dropped the first \(lost) events of \(pruned.count) of \(options.partitions) partitions: \
                it keeps at most 5 MiB per partition, and this backlog is about \(bytes >> 10) KiB of values per \
                partition; use more partitions or fewer events
                """)
        }
    }
}
