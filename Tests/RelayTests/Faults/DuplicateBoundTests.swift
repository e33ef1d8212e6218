import Testing

/// The bound's arithmetic, against values worked out by hand from its definition (the terms in
/// `DuplicateBound`'s documentation), for the settings the fault runs and the soak use.
struct DuplicateBoundTests {
    /// The random-kill run's settings with its input produced before the relay runs: the capacity cap decides.
    /// In flight 200; a 100 ms answer plus 100 ms hand-off is 2 answer times, so 200 × (2 + 1) = 600 finish
    /// behind an unfinished one; a 100 ms commit interval plus hand-off is again 600 stored, not committed.
    @Test func aKillRedoesAtMostTheRelaysCapacityWhenTheWholeInputIsWaiting() {
        let bound = DuplicateBound(
            maxInFlight: 200, apnsLatency: .milliseconds(100), commitInterval: .milliseconds(100), feed: .upFront(10_000))
        #expect(bound.finishing(within: .milliseconds(200)) == 600)
        #expect(bound.capacityPerRelay == 1_400)
        #expect(bound.fed == 10_000)
        #expect(bound.perDisruption(members: 1) == 1_400)
        #expect(bound.kills(5) == 7_000)
    }

    /// The rebalance-churn run: 21 events every 100 ms, a backlog of 147. The window is the longer of the
    /// 200 ms in-flight span and 200 + 100 + 300 = 600 ms; with the span, 800 ms, in which 21 × 8 = 168 are
    /// produced: 147 + 168 = 315 per change, far below the capacity of 200 + 600 + 200 × 7 = 2,200 per relay.
    @Test func aChangeRedoesAtMostWhatTheGroupWasFedWhateverItsSize() {
        let bound = DuplicateBound(
            maxInFlight: 200, apnsLatency: .milliseconds(100), commitInterval: .milliseconds(200),
            rebalanceNotice: .milliseconds(300), feed: .init(events: 21, per: .milliseconds(100), backlog: 147))
        #expect(bound.window == .milliseconds(600))
        #expect(bound.capacityPerRelay == 2_200)
        #expect(bound.fed == 315)
        #expect(bound.perDisruption(members: 1) == 315)
        #expect(bound.perDisruption(members: 3) == 315)
        #expect(bound.changes(membersPerChange: [1, 2, 3]) == 945)
    }

    /// A slow feed against a small group: the capacity cap is the smaller one. 10 in flight, 100 ms answers,
    /// no hand-off: 10 + 10 × (1 + 1) + 10 × (1 + 1) = 50 per relay, while 1,000 events per second over
    /// 100 + 100 ms plus a backlog of 100 is 300.
    @Test func theSmallerCapWins() {
        let bound = DuplicateBound(
            maxInFlight: 10, apnsLatency: .milliseconds(100), commitInterval: .milliseconds(100), handOff: .zero,
            feed: .init(events: 1_000, per: .seconds(1), backlog: 100))
        #expect(bound.capacityPerRelay == 50)
        #expect(bound.fed == 300)
        #expect(bound.perDisruption(members: 1) == 50)
        #expect(bound.perDisruption(members: 2) == 100)
        #expect(bound.perDisruption(members: 7) == 300)
        // A change with nobody counted still revokes the relay that asked: at least one member.
        #expect(bound.perDisruption(members: 0) == 50)
    }

    /// The soak's settings: 500 in flight, 40 ms answers, 1 s commits, 3 s heartbeats. Capacity per relay is
    /// 500 + 500 × (⌈140 / 40⌉ + 1) + 500 × (⌈4,100 / 40⌉ + 1) = 500 + 2,500 + 52,000 = 55,000; 102 events
    /// per second over 4,100 + 140 ms is ⌈432.48⌉ = 433, plus a backlog of 11.
    @Test func theSoaksCapacityIsFarAboveWhatItFeeds() {
        let bound = DuplicateBound(
            maxInFlight: 500, apnsLatency: .milliseconds(40), commitInterval: .seconds(1), rebalanceNotice: .seconds(3),
            feed: .init(events: 102, per: .seconds(1), backlog: 11))
        #expect(bound.capacityPerRelay == 55_000)
        #expect(bound.fed == 444)
        #expect(bound.perDisruption(members: 2) == 444)
    }

    /// The short soak's total: the kill, the join and the leave 444 each; the rejoin 444 + 612 (6 s of feed
    /// while the killed member's session runs out); the 10 s Kafka outage 444 + 1,020; the broker outage of
    /// 150 s / 26 = 5.769 s 444 + ⌈588.4⌉ = 1,033. In all 4,885, where the capacity cap gave 440,000.
    @Test func theShortSoaksBoundAddsWhatItsScheduleLetsPileUp() {
        let plan = SoakPlan(full: false, minutes: 2.5)
        #expect(plan.duplicateBound.bound.fed == 444)
        #expect(plan.duplicateBound.total == 4_885)
    }

    /// Rounding is up, never down: 1 event per 300 ms over 400 ms is 2 (1.33 rounded up), not 1.
    @Test func producedRoundsUp() {
        let feed = DuplicateBound.Feed(events: 1, per: .milliseconds(300), backlog: 0)
        #expect(feed.produced(within: .milliseconds(400)) == 2)
        #expect(feed.produced(within: .milliseconds(300)) == 1)
        #expect(feed.produced(within: .zero) == 0)
    }
}
