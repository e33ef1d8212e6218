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

    @Test func fullBufferPausesAssignedPartitionsAndHalfEmptyResumesThem() {
        var machine = KafkaConsumerStateMachine(capacity: 4)
        _ = machine.partitionsAssigned([p0, p1])
        _ = machine.next()  // the assignment event
        for offset in 0..<3 { #expect(machine.received(message(p0, Int64(offset))).pause.isEmpty) }
        #expect(machine.received(message(p0, 3)).pause == [p0, p1])
        #expect(machine.received(message(p1, 0)).pause.isEmpty, "already paused; later records are kept")
        #expect(machine.bufferedMessageCount == 5)
        for _ in 0..<2 {
            guard case .event(_, let resume) = machine.next() else { Issue.record("expected a message"); return }
            #expect(resume.isEmpty)
        }
        guard case .event(_, let resume) = machine.next() else { Issue.record("expected a message"); return }
        #expect(resume == [p0, p1], "resumed once the buffer is down to half")
    }

    @Test func resumeAfterBackpressureSkipsPartitionsTheApplicationPaused() {
        var machine = KafkaConsumerStateMachine(capacity: 2)
        _ = machine.partitionsAssigned([p0, p1])
        _ = machine.next()
        _ = machine.pauseByApplication([p1])
        _ = machine.received(message(p0, 0))
        #expect(machine.received(message(p0, 1)).pause == [p0, p1])
        #expect(machine.resumeByApplication([p1]).isEmpty, "stays paused while the buffer is full")
        _ = machine.pauseByApplication([p1])
        guard case .event(_, let resume) = machine.next() else { Issue.record("expected a message"); return }
        #expect(resume == [p0])
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
