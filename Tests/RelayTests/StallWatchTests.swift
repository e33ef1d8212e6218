import Testing
@testable import Relay

/// The publisher counts its progress and the stall watch times each count from its first look at it: a stall
/// shows at most one look late, and a count the watch has not seen before always starts the time again.
@Suite struct StallWatchTests {
    private let second: UInt64 = 1_000_000_000

    /// How long the look says records have waited; `nil` when it says none waits.
    private func waited(_ watch: inout StallWatch, progress: UInt64, waiting: Int, at seconds: UInt64) -> Duration? {
        watch.look(progress: progress, waiting: waiting, now: seconds * second)?.duration
    }

    @Test func noStallWhileNothingWaits() {
        var watch = StallWatch(now: 0)
        #expect(waited(&watch, progress: 0, waiting: 0, at: 100) == nil)
    }

    @Test func recordsWaitingWithoutProgressStallFromTheLookThatFirstSawTheCount() {
        var watch = StallWatch(now: 0)
        // A record sent after none waited counts as progress: the first look after it starts the time.
        #expect(waited(&watch, progress: 1, waiting: 1, at: 10) == .zero)
        let later = watch.look(progress: 1, waiting: 3, now: 40 * second)
        #expect(later?.duration == .seconds(30))
        #expect(later?.waiting == 3)
    }

    @Test func progressStartsTheTimeAgain() {
        var watch = StallWatch(now: 0)
        #expect(waited(&watch, progress: 1, waiting: 1, at: 10) == .zero)
        #expect(waited(&watch, progress: 1, waiting: 1, at: 25) == .seconds(15))
        #expect(waited(&watch, progress: 2, waiting: 1, at: 26) == .zero)
        #expect(waited(&watch, progress: 2, waiting: 1, at: 31) == .seconds(5))
    }

    /// A retry takes its record off the count and puts it back a moment later: a look in between sees
    /// nothing waiting, which is no progress, and the stall goes on from where it was.
    @Test func aMomentWithNothingWaitingIsNotProgress() {
        var watch = StallWatch(now: 0)
        #expect(waited(&watch, progress: 1, waiting: 1, at: 10) == .zero)
        #expect(waited(&watch, progress: 1, waiting: 0, at: 20) == nil)
        #expect(waited(&watch, progress: 1, waiting: 1, at: 45) == .seconds(35))
    }

    /// Looks far apart (a probe every 10 s): what happened between them is progress if the count moved, so
    /// the stall is seen one look late at most, never early.
    @Test func aLateLookSeesTheStallOneLookLaterAtMost() {
        var watch = StallWatch(now: 0)
        #expect(waited(&watch, progress: 1, waiting: 1, at: 0) == .zero)
        // Acknowledgements until 5 s, then none: the look at 10 s sees a new count.
        #expect(waited(&watch, progress: 9, waiting: 2, at: 10) == .zero)
        #expect(waited(&watch, progress: 9, waiting: 2, at: 20) == .seconds(10))
    }

    /// No progress since the watch began (its owner's start), with records waiting: timed from the start.
    @Test func noProgressSinceTheStartIsTimedFromTheStart() {
        var watch = StallWatch(now: 5 * second)
        #expect(waited(&watch, progress: 0, waiting: 1, at: 8) == .seconds(3))
    }
}
