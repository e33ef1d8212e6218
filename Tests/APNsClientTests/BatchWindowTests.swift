import ServiceSupport
import Testing
@testable import APNsClient

/// The event loop's batch window, without a loop: answers and turns at chosen instants.
@Suite struct BatchWindowTests {
    private let start = MonotonicInstant.now

    /// Feeds `rate` answers a second, each `answerTime` seconds after its request, over `seconds` from
    /// `from` seconds on, turning every millisecond; returns the window at the end.
    private func run(_ window: inout BatchWindow, rate: Int, answerTime: Double, from: Int = 0, seconds: Int = 2) -> Duration {
        let turns = seconds * 1000
        var owed = 0.0
        for turn in 0..<turns {
            owed += Double(rate) / 1000
            while owed >= 1 {
                window.answered(after: answerTime)
                owed -= 1
            }
            window.turned(at: start + .seconds(from) + .milliseconds(turn))
        }
        return window.current
    }

    @Test func aFastServerKeepsTheFloor() {
        var window = BatchWindow(floor: .milliseconds(2))
        #expect(run(&window, rate: 1500, answerTime: 0.001) == .milliseconds(2))
    }

    @Test func slowAnswersArrivingOneByOneWidenTheWindowToATenthOfTheAnswerTime() {
        var window = BatchWindow(floor: .milliseconds(2))
        let widened = run(&window, rate: 1500, answerTime: 0.07)
        #expect(widened > .microseconds(6900) && widened <= .microseconds(7000), "\(widened)")
    }

    @Test func theWindowGathersAboutATurnsWorthAndNoMore() {
        var window = BatchWindow(floor: .milliseconds(2))
        // 16 answers at 4k/s take 4 ms: less than a tenth of a 200 ms answer time.
        let widened = run(&window, rate: 4000, answerTime: 0.2)
        #expect(widened > .microseconds(3800) && widened < .microseconds(4200), "\(widened)")
    }

    @Test func aTrickleOfVerySlowAnswersStopsAtTheCeiling() {
        var window = BatchWindow(floor: .milliseconds(2))
        #expect(run(&window, rate: 50, answerTime: 1.5) == BatchWindow.ceiling)
    }

    @Test func aBusyLoopKeepsTheFloorHoweverSlowTheServer() {
        var window = BatchWindow(floor: .milliseconds(2))
        // 20k answers a second fill a 2 ms turn many times over: waiting longer would only add latency.
        #expect(run(&window, rate: 20_000, answerTime: 0.04) == .milliseconds(2))
    }

    @Test func theWindowShrinksBackWhenTheRateRises() {
        var window = BatchWindow(floor: .milliseconds(2))
        #expect(run(&window, rate: 1000, answerTime: 0.1) > .milliseconds(9))
        #expect(run(&window, rate: 20_000, answerTime: 0.1, from: 2) == .milliseconds(2))
    }

    @Test func aQueueAtAPNsWidensTheWindowToHalfOfIt() {
        var window = BatchWindow(floor: .milliseconds(2))
        // 20 ms answers on a path that answers in 3 ms without a queue: 17 ms of queue, the window 8.5 ms.
        window.baseline = 0.003
        let widened = run(&window, rate: 1500, answerTime: 0.02)
        #expect(widened > .microseconds(8400) && widened <= .microseconds(8500), "\(widened)")
    }

    @Test func aLongPathWithoutAQueueKeepsATenthOfTheAnswerTime() {
        var window = BatchWindow(floor: .milliseconds(2))
        window.baseline = 0.04
        let widened = run(&window, rate: 1500, answerTime: 0.042)
        #expect(widened > .microseconds(4100) && widened <= .microseconds(4200), "\(widened)")
    }

    @Test func aZeroFloorNeverWaits() {
        var window = BatchWindow(floor: .zero)
        #expect(run(&window, rate: 100, answerTime: 0.5) == .zero)
    }
}
