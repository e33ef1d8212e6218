@testable import Kafka
import Testing

@Suite("Consumer buffer and flow control, without I/O")
struct ConsumerStateMachineTests {
    private let p0 = KafkaTopicPartition(topic: "t", partition: 0)
    private let p1 = KafkaTopicPartition(topic: "t", partition: 1)

    private func message(_ partition: KafkaTopicPartition, _ offset: Int64) -> KafkaConsumerMessage {
        KafkaConsumerMessage(topic: partition.topic, partition: partition.partition, offset: offset, key: nil, value: nil)
    }

    private func nextOffset(_ machine: inout KafkaConsumerStateMachine) -> Int64? {
        if case .event(.message(let message), _) = machine.next() { return message.offset }
        return nil
    }

    @Test func fullBufferStopsThePollerWithoutPausingAndHalfEmptyWakesIt() {
        var machine = KafkaConsumerStateMachine(capacity: 4)
        _ = machine.partitionsAssigned([p0, p1])
        _ = machine.next()  // the assignment event
        let room1 = machine.hasRoom()
        #expect(room1)
        for offset in 0..<4 {
            let action = machine.received(message(p0, Int64(offset)))
            #expect(!action.wakePoller)
            #expect(machine.forwardedPartitions == [p0, p1], "backpressure never stops a partition's forwarding")
        }
        let room2 = machine.hasRoom()
        #expect(!room2, "full: the poll thread leaves records in librdkafka")
        _ = machine.received(message(p1, 0))  // a batch already polled is kept, never dropped
        #expect(machine.bufferedMessageCount == 5)
        for _ in 0..<2 {
            guard case .event(_, let wake) = machine.next() else { Issue.record("expected a message"); return }
            #expect(!wake, "not down to half yet")
        }
        guard case .event(_, let wake) = machine.next() else { Issue.record("expected a message"); return }
        #expect(wake, "woken once the buffer is down to half")
        guard case .event(_, let again) = machine.next() else { Issue.record("expected a message"); return }
        #expect(!again, "woken once")
        let room3 = machine.hasRoom()
        #expect(room3)
    }

    /// Large records fill a lane by their bytes long before its count: header-heavy ones held hundreds of
    /// megabytes in a buffer bounded by count alone. Down to half its bytes, the lane wakes the poller.
    @Test func aLaneIsFullByBytesAndWakesThePollerAtHalfItsBytes() {
        let big = KafkaConsumerMessage(topic: p0.topic, partition: p0.partition, offset: 0, key: nil, value: [UInt8](repeating: 0, count: 1000))
        var machine = KafkaConsumerStateMachine(capacity: 100, byteCapacity: 4 * big.footprint)
        _ = machine.partitionsAssigned([p0])
        _ = machine.next()
        for offset in 0..<4 {
            var record = big
            record.offset = Int64(offset)
            _ = machine.received(record)
        }
        #expect(machine.bufferedBytes(.bulk) == 4 * big.footprint)
        let room = machine.hasRoom()
        #expect(!room, "4 records of 100 fill the lane by bytes")
        guard case .event(_, let first) = machine.next() else { Issue.record("expected a message"); return }
        #expect(!first, "three quarters of the bytes left")
        guard case .event(_, let second) = machine.next() else { Issue.record("expected a message"); return }
        #expect(second, "woken at half the bytes")
        #expect(machine.bufferedBytes(.bulk) == 2 * big.footprint)
    }

    @Test func aPollerThatFoundRoomIsNotWoken() {
        var machine = KafkaConsumerStateMachine(capacity: 4)
        _ = machine.partitionsAssigned([p0])
        _ = machine.next()
        _ = machine.received([message(p0, 0), message(p0, 1)])
        let room4 = machine.hasRoom()
        #expect(room4)
        guard case .event(_, let wake) = machine.next() else { Issue.record("expected a message"); return }
        #expect(!wake, "the poll thread is not waiting for room")
    }

    @Test func droppingARevokedPartitionsRecordsWakesAWaitingPoller() {
        var machine = KafkaConsumerStateMachine(capacity: 2)
        _ = machine.partitionsAssigned([p0, p1])
        _ = machine.next()
        _ = machine.received([message(p0, 0), message(p0, 1)])
        let room5 = machine.hasRoom()
        #expect(!room5)
        let revoked = machine.partitionsRemoved([p0], event: .partitionsLost([p0]))
        #expect(revoked.droppedMessages == 2)
        #expect(revoked.wakePoller)
    }

    /// What is forwarded to the record queues is exactly the assignment: a revoked partition stops, one
    /// assigned again is forwarded again.
    @Test func forwardingFollowsTheAssignment() {
        var machine = KafkaConsumerStateMachine(capacity: 100)
        _ = machine.partitionsAssigned([p0, p1])
        #expect(machine.forwardedPartitions == [p0, p1])
        _ = machine.partitionsRemoved([p0], event: .partitionsRevoked(KafkaPartitionRevocation(partitions: [p0])))
        #expect(machine.forwardedPartitions == [p1])
        _ = machine.partitionsAssigned([p0])
        #expect(machine.forwardedPartitions == [p0, p1])
        _ = machine.partitionsRemoved([p0, p1], event: .partitionsLost([p0, p1]))
        #expect(machine.forwardedPartitions.isEmpty)
    }

    @Test func revocationOvertakesBufferedRecordsAndDropsThoseOfRevokedPartitions() {
        var machine = KafkaConsumerStateMachine(capacity: 100)
        _ = machine.partitionsAssigned([p0, p1])
        _ = machine.next()
        _ = machine.received(message(p0, 0))
        _ = machine.received(message(p1, 0))
        _ = machine.received(message(p0, 1))
        let revocation = KafkaPartitionRevocation(partitions: [p0])
        let action = machine.partitionsRemoved([p0], event: .partitionsRevoked(revocation))
        #expect(action.droppedMessages == 2)
        guard case .event(.partitionsRevoked(let first), _) = machine.next() else {
            Issue.record("revocation should come before buffered records")
            return
        }
        #expect(first.partitions == [p0])
        guard case .event(.message(let remaining), _) = machine.next() else { Issue.record("expected p1's record"); return }
        #expect(remaining.topicPartition == p1)
        guard case .empty = machine.next() else { Issue.record("buffer should be empty"); return }
        #expect(machine.assigned == [p1])
    }

    @Test func finishKeepsPendingRebalanceEventsButDropsRecords() {
        var machine = KafkaConsumerStateMachine(capacity: 100)
        _ = machine.partitionsAssigned([p0])
        _ = machine.received(message(p0, 0))
        #expect(machine.finish().droppedMessages == 1)
        guard case .event(.partitionsAssigned, _) = machine.next() else { Issue.record("assignment kept"); return }
        guard case .finished = machine.next() else { Issue.record("then finished"); return }
        #expect(nextOffset(&machine) == nil)
    }
}
