import Logging
import RelaySandbox
import TestSupport
import Testing

/// `kafka.partitioner`: a result is keyed by its event's key, and by default lands on the partition a Java
/// producer would give that key (Kafka's `DefaultPartitioner`: murmur2 of the key bytes, sign bit cleared,
/// modulo the partition count), so that a reader can join results with a topic a Java service writes.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PartitionerTests {
    let logger = Logger.quiet("partitioner")

    /// Kafka's `Utils.murmur2`, written from its definition (seed 0x9747b28c), checked below against the
    /// vectors of Kafka's own `UtilsTest.testMurmur2`.
    static func murmur2(_ data: [UInt8]) -> Int32 {
        let m: UInt32 = 0x5bd1_e995
        var h: UInt32 = 0x9747_b28c ^ UInt32(truncatingIfNeeded: data.count)
        let whole = data.count / 4
        for i in 0..<whole {
            var k = UInt32(data[4 * i]) | UInt32(data[4 * i + 1]) << 8 | UInt32(data[4 * i + 2]) << 16 | UInt32(data[4 * i + 3]) << 24
            k = k &* m
            k ^= k >> 24
            k = k &* m
            h = h &* m
            h ^= k
        }
        let tail = whole * 4
        switch data.count % 4 {
        case 3:
            h ^= UInt32(data[tail + 2]) << 16
            fallthrough
        case 2:
            h ^= UInt32(data[tail + 1]) << 8
            fallthrough
        case 1:
            h ^= UInt32(data[tail])
            h = h &* m
        default: break
        }
        h ^= h >> 13
        h = h &* m
        h ^= h >> 15
        return Int32(bitPattern: h)
    }

    static func javaPartition(_ key: String, partitions: Int) -> Int32 {
        Int32((Int(murmur2(Array(key.utf8))) & 0x7fff_ffff) % partitions)
    }

    @Test func theHashIsKafkasMurmur2() {
        let vectors: [(String, Int32)] = [
            ("21", -973_932_308), ("foobar", -790_332_482), ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829), ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            ("abc", 479_470_107),
        ]
        for (text, expected) in vectors { #expect(Self.murmur2(Array(text.utf8)) == expected, "\(text)") }
    }

    /// The partition of each event's result, by key.
    private func resultPartitions(overrides: [String: String]) async throws -> (partitions: [String: Int32], count: Int) {
        try await withSandbox(logger: logger) { sandbox in
            let events = (0..<60).map { n in (key: "device-\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            try await sandbox.produce(events)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = try await withRelay(sandbox, overrides: overrides, logger: logger) { _ in
                try await reader.results(count: events.count, timeout: .seconds(90))
            }
            await reader.close()
            return (Dictionary(results.map { ($0.keyString, $0.partition) }) { first, _ in first }, sandbox.options.partitions)
        }
    }

    @Test func resultsLandWhereAJavaProducerPutsTheirKeys() async throws {
        let (partitions, count) = try await resultPartitions(overrides: [:])
        #expect(partitions.count == 60)
        for (key, partition) in partitions.sorted(by: { $0.key < $1.key }) {
            #expect(partition == Self.javaPartition(key, partitions: count), "\(key)")
        }
    }

    /// The control: librdkafka's own partitioner (CRC32) puts some of the same keys elsewhere.
    @Test func librdkafkasDefaultPartitionerPutsThemElsewhere() async throws {
        let (partitions, count) = try await resultPartitions(overrides: ["kafka.partitioner": "consistent_random"])
        let elsewhere = partitions.filter { $0.value != Self.javaPartition($0.key, partitions: count) }
        #expect(elsewhere.count > 10, "CRC32 and murmur2 disagree on most of 60 keys over \(count) partitions: \(elsewhere.count)")
    }
}
