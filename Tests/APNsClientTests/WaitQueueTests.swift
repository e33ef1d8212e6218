import APNsCore
import Testing
@testable import APNsClient

/// The order in which requests waiting for a connection are served: lane and priority first, then apps in
/// turn, each app's requests in order.
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

    @Test func aNotificationIsClassedByLanePriorityAndTopic() throws {
        let token = try DeviceToken(hex: "00ff")
        func notification(_ priority: Priority?, _ lane: DeliveryLane? = nil) -> APNsNotification {
            var n = APNsNotification(target: .device(token), topic: "com.example.app", pushType: .alert, priority: priority, payload: ArraySlice("{}".utf8))
            if let lane { n.lane = lane }
            return n
        }
        #expect(WaitClass(notification(nil, .urgent)) == WaitClass(rank: 0, flow: "com.example.app"), "APNs' default is 10")
        #expect(WaitClass(notification(.immediate, .urgent)).rank == 0)
        #expect(WaitClass(notification(.powerConsiderate, .urgent)).rank == 1)
        #expect(WaitClass(notification(.low, .urgent)).rank == 2)
        #expect(WaitClass(notification(nil)) == WaitClass(rank: 3, flow: "com.example.app"), "bulk unless told otherwise")
        #expect(WaitClass(notification(.immediate)).rank == 3)
        #expect(WaitClass(notification(.powerConsiderate)).rank == 4)
        #expect(WaitClass(notification(.low)).rank == 5)
        #expect(WaitClass(notification(.low, .urgent)).lane == .urgent && WaitClass(notification(.immediate)).lane == .bulk)
        #expect(WaitClass.default == WaitClass(rank: 3, flow: ""), "a request of no class (channel management) is bulk priority 10")
        #expect(WaitClass(rank: 1_000_000, flow: "x").rank == WaitClass.maxRank, "ranks are bounded (the queue keeps one slot per rank)")
        #expect(WaitClass(rank: -3, flow: "x").rank == 0)
    }

    // MARK: - Lanes

    private let urgent = { (flow: String, priority: Int) in WaitClass(lane: .urgent, priorityRank: priority, flow: flow) }
    private let bulk = { (flow: String, priority: Int) in WaitClass(lane: .bulk, priorityRank: priority, flow: flow) }

    /// An urgent priority-1 push goes before a bulk priority-10 one that waited longer.
    @Test func everyUrgentRankGoesBeforeEveryBulkRank() {
        var queue = Queue()
        queue.append("bulk-10", in: bulk("a", 0))
        queue.append("bulk-1", in: bulk("a", 2))
        queue.append("urgent-1", in: urgent("a", 2))
        queue.append("urgent-5", in: urgent("b", 1))
        queue.append("urgent-10", in: urgent("c", 0))
        #expect(queue.count(in: .urgent) == 3 && queue.count(in: .bulk) == 2)
        #expect(drain(&queue) == ["urgent-10", "urgent-5", "urgent-1", "bulk-10", "bulk-1"])
    }

    /// The streak gives a waiting lower rank one turn in nine within the urgent lane, never to bulk: bulk
    /// waits until no urgent request does.
    @Test func theStreakNeverLetsBulkPassUrgent() {
        var queue = Queue()
        queue.append("bulk0", in: bulk("a", 0))
        queue.append("bulk1", in: bulk("a", 0))
        queue.append("urgent-5", in: urgent("a", 1))
        for n in 0..<20 { queue.append("urgent\(n)", in: urgent("a", 0)) }
        let served = drain(&queue)
        #expect(served.firstIndex(of: "urgent-5") == Queue.priorityStreak, "within the urgent lane the streak is as before")
        #expect(Array(served.suffix(2)) == ["bulk0", "bulk1"], "\(served)")
    }

    @Test func withinBulkTheStreakIsUnchanged() {
        var queue = Queue()
        queue.append("low0", in: bulk("a", 1))
        queue.append("low1", in: bulk("a", 1))
        for n in 0..<20 { queue.append("high\(n)", in: bulk("a", 0)) }
        let served = drain(&queue)
        #expect(served.firstIndex(of: "low0") == Queue.priorityStreak)
        #expect(served.firstIndex(of: "low1") == 2 * Queue.priorityStreak + 1)
    }

    /// What the pool asks for when bulk is at its cap: the urgent waiters only; bulk ones stay, in order.
    @Test func skippingBulkRanksServesOnlyUrgentWaiters() {
        var queue = Queue()
        queue.append("bulk0", in: bulk("a", 0))
        queue.append("urgent0", in: urgent("a", 2))
        queue.append("bulk1", in: bulk("b", 0))
        #expect(queue.popFirst(skippingRanksFrom: WaitClass.firstBulkRank) == "urgent0")
        #expect(queue.popFirst(skippingRanksFrom: WaitClass.firstBulkRank) == nil, "only bulk waits")
        #expect(queue.count == 2 && queue.count(in: .bulk) == 2)
        #expect(drain(&queue) == ["bulk0", "bulk1"])
    }

    /// Many more apps than are kept, coming and going at random with removals between, against a model of
    /// one rank (apps in turn, each app's requests in order): an app's queue slot is freed and reused by
    /// another app, and no request may move to another app, be lost, or be served out of turn.
    @Test func appsReusingFreedSlotsKeepTheirOwnRequestsAndTurns() {
        var queue = Queue()
        // Seeded (and the seed in every failure), so that a failing sequence can be replayed.
        let seed = UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
        var waiting: [String: [String]] = [:]  // the model: each app's requests, oldest first
        var turns: [String] = []  // the model: the apps with requests, in the order they are served
        var next = 0
        for step in 0..<20_000 {
            let app = "app\(Int.random(in: 0..<(3 * Queue.keptIdleFlows), using: &generator))"
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<5:
                let request = "\(app)/\(next)"
                next += 1
                queue.append(request, in: WaitClass(rank: 0, flow: app))
                if waiting[app, default: []].isEmpty { turns.append(app) }
                waiting[app, default: []].append(request)
            case 5..<9:
                let served = queue.popFirst()
                guard let owner = turns.first else {
                    #expect(served == nil, "seed \(seed), step \(step): nothing waits")
                    continue
                }
                turns.removeFirst()
                let expected = waiting[owner]!.removeFirst()
                #expect(served == expected, "seed \(seed), step \(step)")
                if !waiting[owner]!.isEmpty { turns.append(owner) }
            default:
                guard let victim = waiting[app]?.randomElement(using: &generator) else { continue }
                #expect(queue.remove { $0 == victim } == victim)
                waiting[app]!.removeAll { $0 == victim }
                if waiting[app]!.isEmpty { turns.removeAll { $0 == app } }
            }
            let count = waiting.values.reduce(0) { $0 + $1.count }
            #expect(queue.count == count, "seed \(seed), step \(step)")
        }
    }
}

/// A seeded random number generator (SplitMix64): a randomized test's sequence can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
