import Kafka
import Testing
@testable import Relay

/// Exactly-once mode's bookkeeping without I/O: which held records a transaction carries, with which offsets.
@Suite struct TransactionBufferTests {
    private let p0 = KafkaTopicPartition(topic: "in", partition: 0)
    private let p1 = KafkaTopicPartition(topic: "in", partition: 1)

    private func record(_ name: String) -> OutgoingRecord {
        OutgoingRecord(topic: "out", key: Array(name.utf8), value: Array(name.utf8))
    }

    private func keys(_ batch: TransactionBuffer<Int>.Batch, _ partition: KafkaTopicPartition) -> [Int64] {
        batch.events[partition]?.map(\.offset) ?? []
    }

    /// An event finished behind one still at APNs waits: its offset cannot be committed yet, so neither
    /// may its records be (a crash would redo it and show them twice).
    @Test func aTransactionCarriesOnlyTheEventsBelowTheFrontier() {
        var buffer = TransactionBuffer<Int>()
        buffer.hold(p0, offset: 0, records: [record("a")], completion: 0)
        buffer.hold(p0, offset: 2, records: [record("c")], completion: 2)  // 1 is still at APNs
        buffer.advance(p0, to: 1)
        let first = buffer.begin()!
        #expect(keys(first, p0) == [0] && first.offsets == [p0: 1])
        #expect(buffer.begin() == nil, "one batch at a time")
        #expect(buffer.committed(first) == [0])
        #expect(buffer.begin() == nil, "nothing due: 2 waits for 1")
        buffer.hold(p0, offset: 1, records: [record("b")], completion: 1)
        buffer.advance(p0, to: 3)
        let second = buffer.begin()!
        #expect(keys(second, p0) == [1, 2] && second.offsets == [p0: 3], "in offset order, with the new frontier")
        #expect(Set(buffer.committed(second)) == [1, 2])
        #expect(buffer.heldEvents == 0)
    }

    @Test func anAbortedBatchComesBackWholeForTheNextTransaction() {
        var buffer = TransactionBuffer<Int>()
        buffer.hold(p0, offset: 0, records: [record("a")], completion: 0)
        buffer.hold(p1, offset: 5, records: [record("b"), record("b-removal")], completion: 5)
        buffer.advance(p0, to: 1)
        buffer.advance(p1, to: 6)
        var batch = buffer.begin()!
        #expect(batch.recordCount == 3 && batch.eventCount == 2)
        batch.events[p1]![0].records[1] = record("b-removal-smaller")  // replaced after a refusal
        #expect(buffer.aborted(batch).isEmpty)
        buffer.hold(p0, offset: 1, records: [record("c")], completion: 1)
        buffer.advance(p0, to: 2)
        let again = buffer.begin()!
        #expect(keys(again, p0) == [0, 1] && keys(again, p1) == [5] && again.offsets == [p0: 2, p1: 6])
        #expect(again.events[p1]![0].records[1].key.map(Array.init) == Array("b-removal-smaller".utf8), "the replacement is kept")
    }

    /// A revoked or lost partition's held records are never produced; their events are given up.
    @Test func aDroppedPartitionGivesItsEventsUpAndCommitsNothingForIt() {
        var buffer = TransactionBuffer<Int>()
        buffer.hold(p0, offset: 0, records: [record("a")], completion: 0)
        buffer.hold(p1, offset: 0, records: [record("b")], completion: 10)
        buffer.advance(p0, to: 1)
        buffer.advance(p1, to: 1)
        let batch = buffer.begin()!
        buffer.hold(p0, offset: 1, records: [record("c")], completion: 1)
        #expect(buffer.drop([p0]) == [1], "held, not in the batch out: given up now")
        #expect(buffer.aborted(batch) == [0], "in the batch out: given up when it ends, not taken back")
        let next = buffer.begin()!
        #expect(next.offsets == [p1: 1], "nothing of the dropped partition")
        #expect(buffer.committed(next) == [10])
        #expect(buffer.heldEvents == 0)
    }

    @Test func abandoningGivesEverythingUp() {
        var buffer = TransactionBuffer<Int>()
        buffer.hold(p0, offset: 0, records: [record("a")], completion: 0)
        buffer.hold(p1, offset: 3, records: [record("b")], completion: 13)
        #expect(Set(buffer.dropAll()) == [0, 13])
        #expect(buffer.heldEvents == 0 && buffer.begin() == nil)
    }
}
