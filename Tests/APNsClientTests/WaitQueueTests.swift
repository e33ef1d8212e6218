import APNsCore
import Testing
@testable import APNsClient

/// The order in which requests waiting for a connection are served: priority first, then apps in turn,
/// each app's requests in order.
@Suite struct WaitQueueTests {
    typealias Queue = WaitQueue<String>

    private func drain(_ queue: inout Queue) -> [String] {
        var served: [String] = []
        while let next = queue.popFirst() { served.append(next) }
        return served
    }

    @Test func appsTakeTurnsAndEachAppKeepsItsOrder() {
        var queue = Queue()
        for n in 0..<5 { queue.append("a\(n)", in: WaitClass(rank: 0, flow: "com.a")) }
        queue.append("b0", in: WaitClass(rank: 0, flow: "com.b"))
        queue.append("b1", in: WaitClass(rank: 0, flow: "com.b"))
        queue.append("c0", in: WaitClass(rank: 0, flow: "com.c"))
        #expect(queue.count == 8)
        #expect(drain(&queue) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"])
        #expect(queue.isEmpty && queue.count == 0)
    }

    @Test func aLowerRankIsServedFirst() {
        var queue = Queue()
        queue.append("low", in: WaitClass(rank: 2, flow: "com.a"))
        queue.append("normal", in: WaitClass(rank: 1, flow: "com.a"))
        queue.append("high-a", in: WaitClass(rank: 0, flow: "com.a"))
        queue.append("high-b", in: WaitClass(rank: 0, flow: "com.b"))
        #expect(queue.popFirst() == "high-a")
        queue.append("high-a2", in: WaitClass(rank: 0, flow: "com.a"))
        #expect(drain(&queue) == ["high-b", "high-a2", "normal", "low"])
    }

    /// A steady backlog of priority 10 slows priority 5 down, never to nothing: one in nine.
    @Test func higherRanksStillGetAShare() {
        var queue = Queue()
        queue.append("low0", in: WaitClass(rank: 1, flow: "a"))
        queue.append("low1", in: WaitClass(rank: 1, flow: "a"))
        for n in 0..<20 { queue.append("high\(n)", in: WaitClass(rank: 0, flow: "a")) }
        let served = drain(&queue)
        #expect(served.firstIndex(of: "low0") == Queue.priorityStreak)
        #expect(served.firstIndex(of: "low1") == 2 * Queue.priorityStreak + 1)
        #expect(served.filter { $0.hasPrefix("high") } == (0..<20).map { "high\($0)" }, "each rank keeps its order")
    }

    /// Apps whose queues emptied are remembered up to a bound (so that waiting costs no allocation) and
    /// forgotten beyond it; either way the turns stay right.
    @Test func manyAppsComeAndGo() {
        var queue = Queue()
        for round in 0..<3 {
            for app in 0..<100 { queue.append("\(round)-\(app)", in: WaitClass(rank: 0, flow: "app\(app)")) }
            #expect(drain(&queue) == (0..<100).map { "\(round)-\($0)" })
            #expect(queue.isEmpty)
        }
        queue.append("x", in: WaitClass(rank: 0, flow: "app7"))
        #expect(queue.remove { $0 == "x" } == "x")
        #expect(queue.isEmpty && queue.popFirst() == nil)
    }

    @Test func anAppThatComesBackWaitsForItsTurn() {
        var queue = Queue()
        queue.append("a0", in: WaitClass(rank: 0, flow: "a"))
        queue.append("b0", in: WaitClass(rank: 0, flow: "b"))
        #expect(queue.popFirst() == "a0")
        queue.append("a1", in: WaitClass(rank: 0, flow: "a"))  // a had left; it rejoins behind b
        #expect(drain(&queue) == ["b0", "a1"])
    }

    @Test func removalsKeepTheRestInOrderAndTheCountTrue() {
        var queue = Queue()
        for n in 0..<4 { queue.append("a\(n)", in: WaitClass(rank: 0, flow: "a")) }
        for n in 0..<2 { queue.append("b\(n)", in: WaitClass(rank: 1, flow: "b")) }
        queue.append("c0", in: WaitClass(rank: 0, flow: "c"))
        #expect(queue.remove { $0 == "c0" } == "c0", "c's only request: c leaves the turns")
        #expect(queue.remove { $0 == "missing" } == nil)
        #expect(queue.removeAll { $0 == "a1" || $0 == "b0" || $0 == "b1" }.sorted() == ["a1", "b0", "b1"])
        #expect(queue.count == 3)
        #expect(queue.minimum { $0 } == "a0")
        #expect(drain(&queue) == ["a0", "a2", "a3"])
        queue.append("x", in: WaitClass(rank: 3, flow: "x"))
        queue.append("y", in: WaitClass(rank: 0, flow: "y"))
        #expect(queue.removeAll().sorted() == ["x", "y"])
        #expect(queue.isEmpty && queue.popFirst() == nil)
    }

    @Test func aNotificationIsClassedByPriorityAndTopic() throws {
        let token = try DeviceToken(hex: "00ff")
        func notification(_ priority: Priority?) -> APNsNotification {
            APNsNotification(target: .device(token), topic: "com.example.app", pushType: .alert, priority: priority, payload: Array("{}".utf8))
        }
        #expect(WaitClass(notification(nil)) == WaitClass(rank: 0, flow: "com.example.app"), "APNs' default is 10")
        #expect(WaitClass(notification(.immediate)).rank == 0)
        #expect(WaitClass(notification(.powerConsiderate)).rank == 1)
        #expect(WaitClass(notification(.low)).rank == 2)
        #expect(WaitClass(rank: 1_000_000, flow: "x").rank == WaitClass.maxRank, "ranks are bounded (the queue keeps one slot per rank)")
        #expect(WaitClass(rank: -3, flow: "x").rank == 0)
    }
}
