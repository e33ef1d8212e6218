import APNsCore
import ServiceSupport
import TestSupport
import Testing
@testable import APNsClient

extension StreamTable {
    /// A request arrives as a connection takes it: it waits for a stream, or gets the table's `refusal` when the
    /// connection opens no more (`ConnectionIO` asks once for a turn's arrivals; here, once per request).
    mutating func enqueue(_ request: consuming Request, deadline: MonotonicInstant) -> Failure? {
        if let refusal { return refusal }
        wait(request, deadline: deadline)
        return nil
    }
}

/// One connection's requests, without I/O: requests are plain strings, stream ids are chosen by the test
/// (as nghttp2 would: odd, ascending).
@Suite struct StreamTableTests {
    typealias Table = StreamTable<String>

    private let start = MonotonicInstant.now
    private func at(_ milliseconds: Int) -> MonotonicInstant { start + .milliseconds(milliseconds) }

    /// Opens every startable request on ids 1, 3, 5, … from `firstID`; returns what opened, by id.
    @discardableResult
    private func startAll(_ table: inout Table, firstID: Int32 = 1) -> [Int32: String] {
        var opened: [Int32: String] = [:]
        var id = firstID
        while let next = table.nextToStart() {
            table.opened(next, streamID: id)
            opened[id] = next.request
            id += 2
        }
        return opened
    }

    @Test func nothingStartsBeforeTheServersSettings() {
        var table = Table()
        #expect(table.enqueue("a", deadline: at(1000)) == nil)
        #expect(table.startable == 0)
        #expect(table.nextToStart() == nil)
        let first = table.settingsReceived(maxConcurrentStreams: 10)
        #expect(first)
        #expect(table.startable == 1)
        #expect(startAll(&table) == [1: "a"])
        let second = table.settingsReceived(maxConcurrentStreams: 10)
        #expect(!second, "only the first SETTINGS makes the connection ready")
    }

    @Test func obeysThePeersConcurrentStreamLimitInArrivalOrder() {
        var table = Table()
        _ = table.settingsReceived(maxConcurrentStreams: 2)
        for name in ["a", "b", "c", "d"] { _ = table.enqueue(name, deadline: at(1000)) }
        #expect(startAll(&table) == [1: "a", 3: "b"])
        #expect(table.waitingCount == 2)
        #expect(table.closed(streamID: 1)?.request == "a")
        #expect(startAll(&table, firstID: 5) == [5: "c"])
        // APNs lowers its limit after refused tokens: open streams finish, nothing new starts above it.
        _ = table.settingsReceived(maxConcurrentStreams: 1)
        #expect(table.startable == 0)
        #expect(table.closed(streamID: 3)?.request == "b")
        #expect(table.startable == 0)
        #expect(table.closed(streamID: 5)?.request == "c")
        #expect(startAll(&table, firstID: 7) == [7: "d"])
    }

    @Test func goawayFailsWaitingRequestsAndMarksStreamsAboveItsLastIDNotProcessed() {
        var table = Table()
        _ = table.settingsReceived(maxConcurrentStreams: 3)
        for name in ["a", "b", "c", "d"] { _ = table.enqueue(name, deadline: at(1000)) }
        startAll(&table)  // a: 1, b: 3, c: 5; d waits
        let failed = table.goawayReceived(lastStreamID: 3)
        #expect(failed.map(\.request) == ["d"])
        #expect(failed.allSatisfy { $0.failure.transport == .notProcessed })
        #expect(table.closed(streamID: 1).map { [$0.request, "\($0.notProcessed)"] } == ["a", "false"])
        #expect(table.closed(streamID: 5).map { [$0.request, "\($0.notProcessed)"] } == ["c", "true"])
        #expect(table.enqueue("e", deadline: at(1000))?.transport == .notProcessed, "no new request after GOAWAY")
        #expect(table.startable == 0)
    }

    @Test func deadlinesEndWaitingRequestsAsNotSentAndOpenOnesAsTimedOut() {
        var table = Table()
        _ = table.settingsReceived(maxConcurrentStreams: 1)
        _ = table.enqueue("open", deadline: at(100))
        startAll(&table)
        _ = table.enqueue("early", deadline: at(50))
        _ = table.enqueue("late", deadline: at(500))
        #expect(table.nextDeadline == at(50))
        let first = table.expire(now: at(60)) { _ in false }
        #expect(first.waiting.map(\.request) == ["early"])
        #expect(first.waiting.first?.failure?.transport == .notSent, "never sent: safe to resend")
        #expect(first.streams.isEmpty)
        #expect(table.nextDeadline == at(100))
        let second = table.expire(now: at(100)) { _ in false }
        #expect(second.streams.map(\.request) == ["open"])
        #expect(second.streams.first?.streamID == 1)
        #expect(second.streams.first?.failure?.transport == .timedOut, "sent: APNs may have it")
        #expect(table.closed(streamID: 1) == nil, "a reset stream's late close finds nothing")
        #expect(table.nextDeadline == at(500))
        #expect(startAll(&table, firstID: 3) == [3: "late"])
    }

    @Test func cancelledRequestsEndWithoutAFailureWhereverTheyAre() {
        var table = Table()
        _ = table.settingsReceived(maxConcurrentStreams: 1)
        _ = table.enqueue("open", deadline: at(1000))
        startAll(&table)
        _ = table.enqueue("waiting", deadline: at(1000))
        _ = table.enqueue("kept", deadline: at(1000))
        let expired = table.expire(now: at(10)) { $0 != "kept" }
        #expect(expired.waiting.map(\.request) == ["waiting"])
        #expect(expired.waiting.allSatisfy { $0.failure == nil })
        #expect(expired.streams.map(\.streamID) == [1], "the open one is reset")
        #expect(expired.streams.allSatisfy { $0.failure == nil })
        #expect(table.waitingCount == 1)
        #expect(table.openCount == 0)
    }

    @Test func aRetiredConnectionHandsBackWhatWaitsAndFinishesWhatIsOpen() {
        var table = Table()
        _ = table.settingsReceived(maxConcurrentStreams: 1)
        _ = table.enqueue("open", deadline: at(1000))
        _ = table.enqueue("waiting", deadline: at(1000))
        startAll(&table)
        let handedBack = table.retire("connection used up its stream ids")
        #expect(handedBack.map(\.request) == ["waiting"])
        #expect(handedBack.first?.failure == .init(transport: .notProcessed, message: "connection used up its stream ids"))
        #expect(table.startable == 0)
        #expect(table.closed(streamID: 1)?.notProcessed == false)
        #expect(table.isEmpty)
    }

    @Test func closingEndsEverythingWithTheRightFailure() {
        var table = Table()
        _ = table.settingsReceived(maxConcurrentStreams: 3)
        for name in ["a", "b", "c", "d"] { _ = table.enqueue(name, deadline: at(1000)) }
        startAll(&table)
        _ = table.goawayReceived(lastStreamID: 1)  // d fails here; b (3) and c (5) are above
        let ended = table.closeAll(failure: .init(transport: .connectionLost, message: "server closed the TLS session"))
        #expect(ended.map(\.request) == ["a", "b", "c"])
        #expect(ended.map(\.failure.transport) == [.connectionLost, .notProcessed, .notProcessed])
        #expect(table.isEmpty)
        #expect(table.nextDeadline == nil)
    }

    @Test func waitingRequestsFailAsNeverSentWhenTheConnectionCloses() {
        var table = Table()
        _ = table.enqueue("a", deadline: at(1000))
        let ended = table.closeAll(failure: .init(transport: .connectionLost, message: "lost"))
        #expect(ended.map(\.failure.transport) == [.notProcessed])
    }
}

/// The event loop's timers, earliest first, in order of arrival at equal deadlines.
@Suite struct TimerQueueTests {
    @Test func popsDueTimersEarliestFirstAndTiesInArrivalOrder() {
        let start = MonotonicInstant.now
        var timers = TimerQueue<String>()
        timers.schedule(at: start + .milliseconds(30), "c")
        timers.schedule(at: start + .milliseconds(10), "a1")
        timers.schedule(at: start + .milliseconds(20), "b")
        timers.schedule(at: start + .milliseconds(10), "a2")
        #expect(timers.earliest == start + .milliseconds(10))
        #expect(timers.popDue(now: start + .milliseconds(5)) == nil)
        var fired: [String] = []
        while let next = timers.popDue(now: start + .milliseconds(20)) { fired.append(next) }
        #expect(fired == ["a1", "a2", "b"])
        #expect(timers.count == 1)
        #expect(timers.popDue(now: start + .milliseconds(30)) == "c")
        #expect(timers.isEmpty)
    }

    @Test func keepsOrderOverManyRandomDeadlines() {
        let start = MonotonicInstant.now
        var timers = TimerQueue<Int>()
        var generator = SeededGenerator(seed: 7)
        let deadlines = (0..<1000).map { _ in Int.random(in: 0..<500, using: &generator) }
        for (i, d) in deadlines.enumerated() { timers.schedule(at: start + .milliseconds(d), i) }
        var previous = -1
        var count = 0
        while let i = timers.popDue(now: start + .seconds(1)) {
            #expect(deadlines[i] >= previous)
            previous = deadlines[i]
            count += 1
        }
        #expect(count == 1000)
    }
}
