import Foundation
import Kafka
import Synchronization
import Testing

@testable import Relay

@Suite struct RelayStateTests {
    /// Pauses and resumes must reach the consumer in the order the gate decides them: a finishing event's
    /// resume that overtook a later pause (both decided under the lock, carried out after it) left partitions
    /// paused while the gate was open. Many tasks admit and finish concurrently against a tiny gate; the
    /// consumer must see strictly alternating pause/resume, ending resumed.
    @Test(.timeLimit(.minutes(1))) func pausesAndResumesReachTheConsumerInGateOrder() async {
        let calls = Mutex<[Bool]>([])
        // Frontiers as stored, per partition: they must only ever move forward, and end past the last event.
        let frontiers = Mutex<[KafkaTopicPartition: [Int64]]>([:])
        let state = RelayState(
            limits: InFlightGate.Limits(maxEvents: 4, maxBytes: 1 << 30, resumeFraction: 0.5, urgentShare: 0),
            storeFrontier: { partition, processed in frontiers.withLock { $0[partition, default: []].append(processed) } }
        ) { lane, pause, _ in
            if lane == .bulk { calls.withLock { $0.append(pause) } }
        }
        let partitions = (0..<8).map { KafkaTopicPartition(topic: "t", partition: Int32($0)) }
        _ = state.assign(partitions)
        // Real threads (more than cores), so that the scheduler can preempt one between a decision and its call.
        let done = DispatchGroup()
        for partition in partitions {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                // Three events at a time per partition, so the gate closes and opens over and over. 3000 per
                // thread: each contended lock hand-off needs the scheduler, and in a full suite pinned to one
                // CPU 15 000 took over a minute (8 s alone).
                for first in stride(from: Int64(0), to: 3_000, by: 3) {
                    for offset in first..<first + 3 where state.admit(partition, offset: offset, bytes: 1) != .admitted {
                        Issue.record("offset \(offset) of \(partition) skipped")
                    }
                    for offset in first..<first + 3 { state.finish(partition, offset: offset, bytes: 1) }
                }
            }
        }
        await withCheckedContinuation { continuation in done.notify(queue: .global()) { continuation.resume() } }
        let seen = calls.withLock { $0 }
        #expect(!seen.isEmpty, "the gate never closed: the test did not exercise anything")
        for (index, pause) in seen.enumerated() where pause != (index % 2 == 0) {
            Issue.record("call \(index) was a \(pause ? "pause" : "resume") out of order")
            break
        }
        #expect(seen.last == false, "the gate is open at the end, so the last call must be a resume")
        #expect(!state.isPaused)
        for (partition, stored) in frontiers.withLock({ $0 }) {
            #expect(stored == stored.sorted() && Set(stored).count == stored.count, "\(partition): frontiers stored out of order")
            #expect(stored.last == 2_999, "\(partition): the last frontier stored is \(stored.last ?? -1)")
        }
        #expect(frontiers.withLock { $0.count } == partitions.count)
    }

    /// A drain wait with a zero deadline is answered by the state, not lost to the timer.
    @Test func aZeroDrainTimeoutReportsTheTruth() async {
        let state = RelayState(limits: InFlightGate.Limits(), storeFrontier: { _, _ in }) { _, _, _ in }
        let partition = KafkaTopicPartition(topic: "t", partition: 0)
        _ = state.assign([partition])
        #expect(await state.waitUntilDrained(nil, timeout: .zero), "nothing in flight: drained")
        _ = state.admit(partition, offset: 0, bytes: 1)
        #expect(await !state.waitUntilDrained([partition], timeout: .zero))
        async let drained = state.waitUntilDrained([partition], timeout: .seconds(30))
        state.finish(partition, offset: 0, bytes: 1)
        #expect(await drained)
    }
}
