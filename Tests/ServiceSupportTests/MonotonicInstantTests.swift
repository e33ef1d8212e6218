import Testing
import ServiceSupport

@Suite struct MonotonicInstantTests {
    @Test func arithmeticIsInNanosecondsAndReadingsAscend() {
        let a = MonotonicInstant(nanoseconds: 1_000)
        #expect(a + .microseconds(2) == MonotonicInstant(nanoseconds: 3_000))
        #expect(a - .nanoseconds(400) == MonotonicInstant(nanoseconds: 600))
        #expect((a + .seconds(1.5)) - a == .milliseconds(1500))
        #expect(a.duration(to: a.advanced(by: .milliseconds(7))) == .milliseconds(7))
        #expect(a < a + .nanoseconds(1))
        let first = MonotonicInstant.now
        let second = MonotonicInstant.now
        #expect(first <= second)
    }

    @Test func farDeadlinesSaturateInsteadOfWrapping() {
        let now = MonotonicInstant.now
        #expect(now + .seconds(Int64.max) == MonotonicInstant(nanoseconds: .max), "a 'never' stays in the future")
        #expect(now - .seconds(Int64.max) < now, "nor a 'long ago' into the future")
        #expect(MonotonicInstant(nanoseconds: .max - 5) + .nanoseconds(10) == MonotonicInstant(nanoseconds: .max))
        #expect(MonotonicInstant(nanoseconds: .min + 5) - .nanoseconds(10) == MonotonicInstant(nanoseconds: .min))
    }
}
