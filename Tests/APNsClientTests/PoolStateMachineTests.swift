import APNsCore
import ServiceSupport
import Testing
@testable import APNsClient

/// The pool's decisions, without I/O: connections are plain ids and loads are set by the test.
@Suite struct PoolStateMachineTests {
    typealias Machine = PoolStateMachine<Int, String>

    private let start = MonotonicInstant.now

    /// A pool of at most 4 connections, no adaptive limit and no idle timeout unless `configure` sets them.
    private func machine(streamBudget: Int = .max, _ configure: (inout APNsClientConfiguration.Pool) -> Void = { _ in }) -> Machine {
        var configuration = APNsClientConfiguration.Pool()
        configuration.maxConnections = 4
        configuration.adaptiveConcurrency = false
        configuration.idleTimeout = nil
        configure(&configuration)
        return Machine(configuration: configuration, streamBudget: streamBudget, now: start)
    }

    private func ready(streams: Int = 100, window: Int = 65_535, latency: Double = 0.01) -> ConnectionLoad {
        var load = ConnectionLoad()
        load.phase = .ready
        load.maxConcurrentStreams = streams
        load.sendWindow = window
        load.latency = latency
        return load
    }

    /// Opens connections 1…n (as the pool would after `open` actions) with `load`.
    private func connect(_ machine: inout Machine, _ ids: ClosedRange<Int>, load: ConnectionLoad) {
        for id in ids {
            machine.connectStarted()
            _ = machine.connected(id: id, connection: id, load: load)
        }
    }

    private func picked(_ pick: Machine.Pick) -> Int? {
        if case .connection(let id) = pick { return id }
        return nil
    }

    private func at(_ milliseconds: Int) -> MonotonicInstant { start + .milliseconds(milliseconds) }

    @Test func theFirstRequestOpensAConnectionAndWaitsForIt() {
        var m = machine()
        let (pick, actions) = m.request(id: 1, deadline: at(1000), payload: "a", now: at(0))
        guard case .wait = pick else { Issue.record("no connection yet: \(pick)"); return }
        #expect(actions.open == 1)
        #expect(actions.startSweeper)
        let (added, connected) = m.connected(id: 7, connection: 7, load: ready())
        #expect(added)
        #expect(connected.handOff.map(\.connection) == [7])
        #expect(connected.handOff.map(\.waiter.payload) == ["a"])
    }

    @Test func picksTheLeastLoadedUsableConnection() {
        var m = machine()
        connect(&m, 1...2, load: ready(streams: 10))
        var retired = ready(streams: 10)
        retired.retired = true
        connect(&m, 3...3, load: retired)
        var counts: [Int: Int] = [:]
        for id in 0..<6 {
            let chosen = picked(m.request(id: id, deadline: at(1000), payload: "", now: at(0)).0)
            counts[chosen ?? -1, default: 0] += 1
        }
        #expect(counts == [1: 3, 2: 3], "spread over the two usable ones, never the retired one")
        #expect(m.inFlight == 6)
    }

    @Test func aFullConnectionMakesRequestsWaitAndAnAnswerHandsTheStreamToTheFirst() {
        var m = machine { $0.maxConnections = 1 }
        connect(&m, 1...1, load: ready(streams: 1))
        #expect(picked(m.request(id: 1, deadline: at(1000), payload: "first", now: at(0)).0) == 1)
        let (second, actions) = m.request(id: 2, deadline: at(1000), payload: "second", now: at(0))
        guard case .wait = second else { Issue.record("the only stream is taken: \(second)"); return }
        #expect(actions.open == 0, "at the maximum")
        _ = m.request(id: 3, deadline: at(1000), payload: "third", now: at(0))
        let answered = m.finished(on: 1, load: ready(streams: 1), outcome: .answered(replaceConnection: false), latency: .milliseconds(10), now: at(5))
        #expect(answered.handOff.map(\.waiter.payload) == ["second"], "first in, first out")
        #expect(m.waiterCount == 1)
    }

    @Test func opensAnotherWhenEveryConnectionIsSaturatedUpToTheMaximum() {
        var m = machine { $0.maxConnections = 2 }
        connect(&m, 1...1, load: ready(streams: 1))
        let (_, first) = m.request(id: 1, deadline: at(1000), payload: "", now: at(0))
        #expect(first.open == 1, "its only stream is now taken")
        _ = m.connected(id: 2, connection: 2, load: ready(streams: 1))
        _ = m.request(id: 2, deadline: at(1000), payload: "", now: at(0))
        let (_, third) = m.request(id: 3, deadline: at(1000), payload: "", now: at(0))
        #expect(third.open == 0, "two is the maximum")
    }

    /// On a long link each connection carries one flow-control window per round trip: while requests wait
    /// and half the connections are out of window, another connection adds bandwidth.
    @Test func opensForWindowStarvedConnectionsWhileRequestsWait() {
        var m = machine { $0.maxConnections = 8; $0.adaptive(ConcurrencyLimit.Configuration(initial: 4, minimum: 4, maximum: 4)) }
        connect(&m, 1...4, load: ready(streams: 1000))
        for id in 0..<4 { _ = m.request(id: id, deadline: at(1000), payload: "", now: at(0)) }
        let (pick, _) = m.request(id: 9, deadline: at(1000), payload: "", now: at(0))
        guard case .wait = pick else { Issue.record("the limit (4) holds it: \(pick)"); return }
        // One of four out of window: not enough.
        let one = m.finished(on: 1, load: ready(streams: 1000, window: 1000), outcome: .answered(replaceConnection: false), latency: .milliseconds(40), now: at(10))
        #expect(one.open == 0)
        _ = m.request(id: 10, deadline: at(1000), payload: "", now: at(10))
        _ = m.request(id: 11, deadline: at(1000), payload: "", now: at(10))
        let two = m.finished(on: 2, load: ready(streams: 1000, window: 1000), outcome: .answered(replaceConnection: false), latency: .milliseconds(40), now: at(20))
        #expect(two.open == 1, "two of four out of send window while requests wait")
    }

    @Test func doesNotOpenForWindowStarvationWhenNothingWaits() {
        var m = machine { $0.maxConnections = 8 }
        connect(&m, 1...2, load: ready(streams: 1000, window: 1000))
        var starvedButFree = ready(streams: 1000, window: 30_000)
        starvedButFree.latency = 0.01
        _ = m.request(id: 1, deadline: at(1000), payload: "", now: at(0))
        let actions = m.finished(on: 1, load: starvedButFree, outcome: .answered(replaceConnection: false), latency: .milliseconds(10), now: at(10))
        #expect(actions.open == 0)
    }

    @Test func retiresAConnectionAnAnswerSpoiledAfterTimeoutsAndWhenItsStreamIDsRunOut() {
        var m = machine(streamBudget: 3) { $0.maxTimeoutsPerConnection = 2 }
        connect(&m, 1...3, load: ready())
        for id in 0..<3 { _ = m.request(id: id, deadline: at(1000), payload: "", now: at(0)) }
        let spoiled = m.finished(on: 1, load: ready(), outcome: .answered(replaceConnection: true), latency: .milliseconds(10), now: at(1))
        #expect(spoiled.retire.map(\.connection) == [1])
        #expect(spoiled.retire.map(\.reason) == [.spoiledByAnswer])
        #expect(spoiled.open == 0, "the other two carry the load: nothing is saturated")

        // The load the pool reads already counts the timeout being reported (the loop publishes it first).
        var once = ready()
        once.timeouts = 1
        let first = m.finished(on: 2, load: once, outcome: .timedOut, latency: .seconds(10), now: at(2))
        #expect(first.retire.isEmpty, "one timeout of the two allowed: counted once, not twice")
        _ = m.request(id: 4, deadline: at(1000), payload: "", now: at(2))
        var twice = ready()
        twice.timeouts = 2
        let timedOut = m.finished(on: 2, load: twice, outcome: .timedOut, latency: .seconds(10), now: at(2))
        #expect(timedOut.retire.map(\.reason) == [.timeouts], "the second timeout on it")

        // Connection 3 had one request; two more use up its three stream ids.
        _ = m.request(id: 5, deadline: at(1000), payload: "", now: at(3))
        _ = m.request(id: 6, deadline: at(1000), payload: "", now: at(3))
        let ids = m.connections.first { $0.value == 3 }.flatMap { m.entries[$0.key] }?.assigned
        #expect(ids == 3)
        #expect(m.finished(on: 3, load: ready(), outcome: .answered(replaceConnection: false), latency: .milliseconds(1), now: at(4)).retire.isEmpty, "still busy")
        #expect(m.finished(on: 3, load: ready(), outcome: .answered(replaceConnection: false), latency: .milliseconds(1), now: at(4)).retire.isEmpty, "still busy")
        let exhausted = m.finished(on: 3, load: ready(), outcome: .answered(replaceConnection: false), latency: .milliseconds(1), now: at(4))
        #expect(exhausted.retire.map(\.reason) == [.streamIDsExhausted])
    }

    @Test func aFailedConnectBacksOffAndFailsWaitersWhenNothingElseCanServeThem() {
        var m = machine { $0.reconnectBackoffBase = .milliseconds(100) }
        let (_, first) = m.request(id: 1, deadline: at(1000), payload: "waiting", now: at(0))
        #expect(first.open == 1)
        let failed = m.connectFailed(APNsClientError(transport: .connectFailed, "refused"))
        #expect(failed.fail.map(\.waiter.payload) == ["waiting"], "nothing usable, nothing connecting")
        let delay = try! #require(failed.reconnectAfter)
        #expect(delay >= .milliseconds(50) && delay <= .milliseconds(100), "jittered base backoff: \(delay)")
        let (_, again) = m.request(id: 2, deadline: at(1000), payload: "", now: at(1))
        #expect(again.open == 0, "no connect while the backoff runs")
        #expect(m.reconnectTimerFired().open == 1)
        let second = m.connectFailed(APNsClientError(transport: .connectFailed, "refused"))
        let longer = try! #require(second.reconnectAfter)
        #expect(longer >= .milliseconds(100) && longer <= .milliseconds(200), "doubles: \(longer)")
    }

    @Test func expiredWaitersFailWithWhyNothingCame() {
        var m = machine()
        _ = m.request(id: 1, deadline: at(10), payload: "short", now: at(0))
        _ = m.request(id: 2, deadline: at(1000), payload: "long", now: at(0))
        let early = m.sweep(now: at(5))
        #expect(early.expired.isEmpty && early.keepSweeping)
        let late = m.sweep(now: at(20))
        #expect(late.expired.map(\.waiter.payload) == ["short"])
        // Never sent, and why: its connection was still being opened (a connect that hangs until its timeout).
        #expect(late.expired.first?.error.transportFailure == .connectFailed)
        #expect(late.expired.first?.error.message.contains("still under way") == true, "\(String(describing: late.expired.first?.error))")
        #expect(late.keepSweeping, "one still waits")
        _ = m.connectFailed(APNsClientError(transport: .connectFailed, "TLS handshake failed"))
        #expect(m.waiterCount == 0, "the failed connect failed the last waiter: nothing else could serve it")
        #expect(!m.sweep(now: at(30)).keepSweeping)
    }

    /// With a connection up, a request that waited past its deadline waited for a stream (or the adaptive
    /// limit), not for a connect: `notSent`, not `connectFailed`.
    @Test func expiredWaitersBehindBusyConnectionsAreNotSent() {
        var m = machine { $0.maxConnections = 1 }
        connect(&m, 1...1, load: ready(streams: 1))
        #expect(picked(m.request(id: 1, deadline: at(1000), payload: "sent", now: at(0)).0) == 1)
        _ = m.request(id: 2, deadline: at(10), payload: "waits", now: at(0))
        let late = m.sweep(now: at(20))
        #expect(late.expired.map(\.waiter.payload) == ["waits"])
        #expect(late.expired.first?.error.transportFailure == .notSent)
        #expect(late.expired.first?.error.message == "no free stream before the deadline")
    }

    /// Connections that only drain (after GOAWAY, or retired), no connect error: the wait was for their
    /// replacement, not a connect that failed, so it is `notSent` and costs no attempt.
    @Test(arguments: [true, false]) func expiredWaitersBehindDrainingConnectionsAreNotSent(goaway: Bool) {
        var m = machine { $0.maxConnections = 1 }
        var retired = ready(streams: 10)
        if goaway { retired.phase = .draining } else { retired.retired = true }
        connect(&m, 1...1, load: retired)
        _ = m.request(id: 1, deadline: at(10), payload: "waits", now: at(0))
        let late = m.sweep(now: at(20))
        #expect(late.expired.map(\.waiter.payload) == ["waits"])
        #expect(late.expired.first?.error.transportFailure == .notSent, "\(String(describing: late.expired.first?.error))")
    }

    /// Waiters are served by class: one app's backlog does not hold up another app's request, and a
    /// priority-10 push goes before priority 5.
    @Test func waitersAreServedByPriorityThenAppsInTurn() {
        var m = machine { $0.maxConnections = 1 }
        connect(&m, 1...1, load: ready(streams: 1))
        let app = { (flow: String, rank: Int) in WaitClass(rank: rank, flow: flow) }
        #expect(picked(m.request(id: 0, deadline: at(1000), class: app("a", 0), payload: "a0", now: at(0)).0) == 1)
        for n in 1...3 { _ = m.request(id: n, deadline: at(1000), class: app("a", 0), payload: "a\(n)", now: at(0)) }
        _ = m.request(id: 4, deadline: at(1000), class: app("b", 0), payload: "b0", now: at(0))
        _ = m.request(id: 5, deadline: at(1000), class: app("a", 1), payload: "a-priority-5", now: at(0))
        var served: [String] = []
        for step in 0..<5 {
            let actions = m.finished(on: 1, load: ready(streams: 1), outcome: .answered(replaceConnection: false), latency: .milliseconds(1), now: at(step + 1))
            served += actions.handOff.map(\.waiter.payload)
        }
        #expect(served == ["a1", "b0", "a2", "a3", "a-priority-5"])
    }

    @Test func cancelledWaitersLeaveTheQueue() {
        var m = machine()
        _ = m.request(id: 1, deadline: at(1000), payload: "a", now: at(0))
        _ = m.request(id: 2, deadline: at(1000), payload: "b", now: at(0))
        #expect(m.removeWaiter(id: 1)?.payload == "a")
        #expect(m.removeWaiter(id: 1) == nil)
        let (_, connected) = m.connected(id: 1, connection: 1, load: ready())
        #expect(connected.handOff.map(\.waiter.payload) == ["b"])
    }

    @Test func theAdaptiveLimitHoldsRequestsBackAndLearnsFromAnswers() {
        var m = machine { $0.adaptive(ConcurrencyLimit.Configuration(initial: 2, minimum: 2)) }
        connect(&m, 1...1, load: ready(streams: 1000))
        #expect(picked(m.request(id: 1, deadline: at(1000), payload: "", now: at(0)).0) == 1)
        #expect(picked(m.request(id: 2, deadline: at(1000), payload: "", now: at(0)).0) == 1)
        let (third, _) = m.request(id: 3, deadline: at(1000), payload: "", now: at(0))
        guard case .wait = third else { Issue.record("above the limit of 2: \(third)"); return }
        let answered = m.finished(on: 1, load: ready(streams: 1000), outcome: .answered(replaceConnection: false), latency: .milliseconds(10), now: at(10))
        #expect(answered.handOff.count >= 1, "the freed slot (and the grown limit) go to the waiter")
        #expect(answered.newLimit == 3, "slow start: one more per answer while the limit is used")
    }

    @Test func shutdownFailsWaitersAndRefusesNewRequests() {
        var m = machine()
        connect(&m, 1...1, load: ready(streams: 1))
        _ = m.request(id: 1, deadline: at(1000), payload: "sent", now: at(0))
        _ = m.request(id: 2, deadline: at(1000), payload: "waiting", now: at(0))
        let (waiters, connections) = m.shutdown()
        #expect(waiters.map(\.payload) == ["waiting"])
        #expect(connections == [1])
        guard case .fail(let error) = m.request(id: 3, deadline: at(1000), payload: "", now: at(1)).0 else {
            Issue.record("refused after shutdown")
            return
        }
        #expect(error.code == .shutdown)
        #expect(!m.isDrained, "connection 1 is still open")
        _ = m.connectionChanged(id: 1, load: ConnectionLoad(phase: .closed), event: .closed)
        #expect(!m.isDrained, "two connects (for the saturated connection) are under way")
        #expect(!m.connected(id: 2, connection: 2, load: ready()).added, "not added while shutting down: the pool drains it")
        #expect(m.connectFailed(APNsClientError(transport: .connectFailed, "refused")).reconnectAfter == nil, "no reconnect while shutting down")
        #expect(m.isDrained)
    }

    /// A pool nobody sends through lets its connections go and does not reconnect when they close; the next
    /// request opens one again.
    @Test func anIdlePoolClosesItsConnectionsAndDoesNotReconnect() {
        var m = machine { $0.idleTimeout = .seconds(60) }
        connect(&m, 1...1, load: ready())
        _ = m.request(id: 1, deadline: at(1000), payload: "", now: at(0))
        _ = m.finished(on: 1, load: ready(), outcome: .answered(replaceConnection: false), latency: .milliseconds(5), now: at(10))
        #expect(m.closeIfIdle(now: at(30_000)).isEmpty, "used 30 s ago: not idle")
        #expect(m.closeIfIdle(now: at(60_001)) == [1], "idle for the timeout: its connection goes")
        #expect(m.closeIfIdle(now: at(60_002)).isEmpty, "once")
        let closed = m.connectionChanged(id: 1, load: ConnectionLoad(phase: .closed), event: .closed, now: at(60_010))
        #expect(closed.open == 0, "an idle pool does not reconnect to its minimum")
        let (pick, next) = m.request(id: 2, deadline: at(70_000), payload: "again", now: at(61_000))
        guard case .wait = pick else { Issue.record("no connection now: \(pick)"); return }
        #expect(next.open == 1, "a request opens one again")
    }

    @Test func aBusyPoolReconnectsToItsMinimum() {
        var m = machine { $0.idleTimeout = .seconds(60) }
        connect(&m, 1...1, load: ready())
        _ = m.request(id: 1, deadline: at(1000), payload: "", now: at(0))
        let closed = m.connectionChanged(id: 1, load: ConnectionLoad(phase: .closed), event: .closed, now: at(10))
        #expect(closed.open == 1, "in use: the closed connection is replaced")
        #expect(m.closeIfIdle(now: at(120_000)).isEmpty, "a request is still in flight: not idle")
    }

    // MARK: - Lanes

    private let urgent = WaitClass(lane: .urgent, priorityRank: 0, flow: "u")
    private let bulk = WaitClass(lane: .bulk, priorityRank: 0, flow: "b")

    private func fixedLimit(_ value: Int) -> ConcurrencyLimit.Configuration {
        ConcurrencyLimit.Configuration(initial: value, minimum: value, maximum: value)
    }

    private func answered(_ m: inout Machine, on id: Int = 1, lane: DeliveryLane, streams: Int = 1000, at ms: Int = 1) -> Machine.Actions {
        m.finished(on: id, lane: lane, load: ready(streams: streams), outcome: .answered(replaceConnection: false), latency: .milliseconds(1), now: at(ms))
    }

    /// With a limit of 10 and a fifth kept for urgent, bulk holds 8 and waits; urgent still gets the rest.
    @Test func bulkIsCappedAtItsShareOfTheLimitAndUrgentStillGoes() {
        var m = machine { $0.adaptive(fixedLimit(10)); $0.urgentShare = 0.2 }
        connect(&m, 1...1, load: ready(streams: 1000))
        for id in 0..<8 { #expect(picked(m.request(id: id, deadline: at(1000), class: bulk, payload: "b\(id)", now: at(0)).0) == 1) }
        guard case .wait = m.request(id: 8, deadline: at(1000), class: bulk, payload: "b8", now: at(0)).0 else {
            Issue.record("bulk is at floor(10 × 0.8) = 8"); return
        }
        #expect(picked(m.request(id: 9, deadline: at(1000), class: urgent, payload: "u0", now: at(0)).0) == 1)
        #expect(picked(m.request(id: 10, deadline: at(1000), class: urgent, payload: "u1", now: at(0)).0) == 1)
        #expect(m.inFlight == 10 && m.inFlightBulk == 8)
        #expect(m.laneCounts == .init(urgentInFlight: 2, bulkInFlight: 8, urgentWaiting: 0, bulkWaiting: 1))
    }

    /// With adaptive concurrency off, streams bind: two connections of 5 streams let bulk hold 8 of 10.
    @Test func bulkIsCappedAtItsShareOfTheStreamsWhenStreamsBind() {
        var m = machine { $0.maxConnections = 2; $0.urgentShare = 0.2 }
        connect(&m, 1...2, load: ready(streams: 5))
        for id in 0..<8 { #expect(picked(m.request(id: id, deadline: at(1000), class: bulk, payload: "", now: at(0)).0) != nil) }
        guard case .wait = m.request(id: 8, deadline: at(1000), class: bulk, payload: "b8", now: at(0)).0 else {
            Issue.record("bulk is at floor(2 × 5 × 0.8) = 8"); return
        }
        #expect(picked(m.request(id: 9, deadline: at(1000), class: urgent, payload: "", now: at(0)).0) != nil)
        #expect(picked(m.request(id: 10, deadline: at(1000), class: urgent, payload: "", now: at(0)).0) != nil)
        #expect(m.inFlight == 10 && m.inFlightBulk == 8, "every stream taken, two of them by urgent")
    }

    @Test func urgentMayUseAllTheCapacity() {
        var m = machine { $0.adaptive(fixedLimit(10)); $0.urgentShare = 0.5 }
        connect(&m, 1...1, load: ready(streams: 1000))
        for id in 0..<10 { #expect(picked(m.request(id: id, deadline: at(1000), class: urgent, payload: "", now: at(0)).0) == 1) }
        guard case .wait = m.request(id: 10, deadline: at(1000), class: bulk, payload: "", now: at(0)).0 else {
            Issue.record("the limit is full"); return
        }
        #expect(m.inFlight == 10 && m.inFlightBulk == 0)
    }

    /// At bulk's cap a freed slot goes to an urgent waiter though bulk waited longer, and to no bulk waiter
    /// until a bulk request finishes; `finished` gives back the lane the request counted against.
    @Test func atTheCapBulkWaitersAreSkippedForUrgentOnes() {
        var m = machine { $0.adaptive(fixedLimit(10)); $0.urgentShare = 0.2 }
        connect(&m, 1...1, load: ready(streams: 1000))
        for id in 0..<8 { _ = m.request(id: id, deadline: at(1000), class: bulk, payload: "", now: at(0)) }
        for id in 8..<10 { _ = m.request(id: id, deadline: at(1000), class: urgent, payload: "", now: at(0)) }
        _ = m.request(id: 10, deadline: at(1000), class: bulk, payload: "bulk-waiter", now: at(0))
        _ = m.request(id: 11, deadline: at(1000), class: urgent, payload: "urgent-waiter", now: at(0))
        #expect(m.waiterCount == 2)

        let first = answered(&m, lane: .urgent)
        #expect(first.handOff.map(\.waiter.payload) == ["urgent-waiter"])
        #expect(m.inFlight == 10 && m.inFlightBulk == 8, "the urgent answer gave back an urgent slot")

        let second = answered(&m, lane: .urgent)
        #expect(second.handOff.isEmpty, "a free slot, but bulk is at its cap")
        #expect(m.inFlight == 9 && m.inFlightBulk == 8)
        guard case .wait = m.request(id: 12, deadline: at(1000), class: bulk, payload: "", now: at(2)).0 else {
            Issue.record("a new bulk request waits too"); return
        }

        let third = answered(&m, lane: .bulk)
        #expect(third.handOff.map(\.waiter.payload) == ["bulk-waiter"], "a bulk answer frees a bulk slot")
        #expect(m.inFlight == 9 && m.inFlightBulk == 8)
        #expect(m.laneCounts == .init(urgentInFlight: 1, bulkInFlight: 8, urgentWaiting: 0, bulkWaiting: 1))
    }

    /// No share kept: bulk may take everything, as before lanes.
    @Test func withNoShareBulkTakesEverything() {
        var m = machine { $0.adaptive(fixedLimit(10)) }
        connect(&m, 1...1, load: ready(streams: 1000))
        for id in 0..<10 { #expect(picked(m.request(id: id, deadline: at(1000), class: bulk, payload: "", now: at(0)).0) == 1) }
        #expect(m.inFlightBulk == 10)
        _ = m.request(id: 10, deadline: at(1000), class: bulk, payload: "next", now: at(0))
        #expect(answered(&m, lane: .bulk).handOff.map(\.waiter.payload) == ["next"])
        #expect(m.inFlightBulk == 10)
    }

    /// APNs advertises one stream until a connection's first push succeeds: bulk may always have one.
    @Test func bulkAlwaysHasAtLeastOne() {
        var m = machine { $0.maxConnections = 1; $0.urgentShare = 0.9 }
        connect(&m, 1...1, load: ready(streams: 1))
        #expect(picked(m.request(id: 0, deadline: at(1000), class: bulk, payload: "", now: at(0)).0) == 1)
        #expect(m.inFlightBulk == 1)
    }

    /// Bulk held at a cap that streams set (not the limit) asks for another connection: none is saturated,
    /// since bulk never fills one.
    @Test func bulkAtAStreamBoundCapOpensAnotherConnection() {
        var m = machine { $0.maxConnections = 2; $0.urgentShare = 0.2 }
        connect(&m, 1...1, load: ready(streams: 10))
        for id in 0..<8 {
            let (_, actions) = m.request(id: id, deadline: at(1000), class: bulk, payload: "", now: at(0))
            #expect(actions.open == 0, "request \(id): bulk is below its cap")
        }
        let (pick, actions) = m.request(id: 8, deadline: at(1000), class: bulk, payload: "", now: at(0))
        guard case .wait = pick else { Issue.record("at floor(10 × 0.8) = 8: \(pick)"); return }
        #expect(actions.open == 1)
    }

    /// The gauges get the lane counts when they changed, at most every `loadRefreshInterval`, and at once
    /// when the pool goes quiet.
    @Test func laneCountsArePublishedThrottledAndWhenQuiet() {
        var m = machine { $0.adaptive(fixedLimit(10)) }
        connect(&m, 1...1, load: ready(streams: 1000))
        _ = m.request(id: 0, deadline: at(1000), class: bulk, payload: "", now: at(0))
        #expect(m.laneCountsDue(now: at(1)) == nil, "published less than 5 ms ago (at the start)")
        #expect(m.laneCountsDue(now: at(6))?.bulkInFlight == 1)
        _ = m.request(id: 1, deadline: at(1000), class: urgent, payload: "", now: at(7))
        #expect(m.laneCountsDue(now: at(7)) == nil)
        _ = answered(&m, lane: .bulk, at: 8)
        _ = answered(&m, lane: .urgent, at: 8)
        #expect(m.laneCountsDue(now: at(8)) == .init(), "quiet: zero at once")
        #expect(m.laneCountsDue(now: at(20)) == nil, "unchanged")
    }
}

private extension APNsClientConfiguration.Pool {
    mutating func adaptive(_ limit: ConcurrencyLimit.Configuration) {
        adaptiveConcurrency = true
        adaptiveLimit = limit
    }
}
