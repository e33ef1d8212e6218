/// The most duplicate results a run's disruptions can cause, derived from the relay's configuration, the mock
/// APNs' fixed answer time and what the test feeds — never from what the run measured (STYLE.md 15a).
///
/// At least once, a disruption redoes every event whose result was written but whose offset was not
/// committed. For one relay at the moment it is killed (or revoked, during a rebalance whose commits the
/// mock coordinator refuses), those are:
/// 1. the events in flight: at most `maxInFlight` (`relay.maxInFlightEvents`; the gate holds intake there);
/// 2. events finished behind an earlier unfinished one of their partition (offsets are stored contiguously):
///    finished within the last `apnsLatency + handOff`, the longest an event stays in flight when it spends
///    `apnsLatency` at APNs and no more waits for a stream (the adaptive limit off, more streams than events);
/// 3. events stored but not yet committed: finished within the last `commitInterval + handOff`, plus
///    `rebalanceNotice` when a rebalance refuses commits until each member hears of it (a heartbeat).
///
/// Two caps apply to each disruption, and the bound is the smaller:
/// - capacity: every event spends at least `apnsLatency` at APNs and at most `maxInFlight` are in flight, so
///   at most `maxInFlight × (T / apnsLatency + 1)` events finish within any time `T` (Little's law, per slot),
///   per relay;
/// - feed: every redone event (terms 1–3 together) was taken from Kafka within the last `window + inFlightSpan`
///   (it finished within `window`, or is still in flight, and no event stays in flight longer than
///   `inFlightSpan`). It was then either waiting when that span began (`feed.backlog`) or produced during it
///   (at most `feed.events` per `feed.per`), so the group as a whole redoes at most
///   `backlog + events × (window + inFlightSpan) / per`, however many members share the work.
struct DuplicateBound: CustomStringConvertible {
    /// What a test feeds the relay.
    struct Feed: CustomStringConvertible {
        /// The test produces at most `events` events per `per` while it streams.
        var events: Int
        var per: Duration
        /// The most events already waiting in the input when a disruption's span begins: a batch produced at
        /// once, everything produced before the relay started, or what piles up while nobody consumes.
        var backlog: Int

        /// A test that produces all its input before the relay runs: the whole input is the backlog, so only
        /// the capacity cap means anything.
        static func upFront(_ events: Int) -> Feed { Feed(events: 0, per: .seconds(1), backlog: events) }

        /// Events produced within `span`, rounded up.
        func produced(within span: Duration) -> Int {
            let spanMilliseconds = Int(span.milliseconds), perMilliseconds = Int(max(1, per.milliseconds))
            return (events * spanMilliseconds + perMilliseconds - 1) / perMilliseconds
        }

        var description: String { "\(events) events per \(per) with a backlog of \(backlog)" }
    }

    /// `relay.maxInFlightEvents`.
    var maxInFlight: Int
    /// The mock's answer time (`FaultInjector.Latency(rtt:)` with no jitter): the shortest and, with the
    /// adaptive concurrency limit off, the usual time an event spends at APNs.
    var apnsLatency: Duration
    /// `kafka.autoCommitIntervalMs`.
    var commitInterval: Duration
    /// `heartbeat.interval.ms` in runs with joins and leaves; zero for kills.
    var rebalanceNotice: Duration = .zero
    /// The relay's own hops around APNs and a commit's round trip to the mock cluster (batch windows of at
    /// most 10 ms each, loopback round trips): allowed this much per term.
    var handOff: Duration = .milliseconds(100)
    /// What the test feeds.
    var feed: Feed

    /// Events one relay can finish within `window` (the capacity cap).
    func finishing(within window: Duration) -> Int {
        maxInFlight * (Int((window / apnsLatency).rounded(.up)) + 1)
    }

    /// The longest an event stays in flight (term 2's window).
    var inFlightSpan: Duration { apnsLatency + handOff }

    /// How far back a redone event can have finished: the longer of terms 2 and 3.
    var window: Duration { max(inFlightSpan, commitInterval + handOff + rebalanceNotice) }

    /// Terms 1–3 for one relay, from its capacity alone.
    var capacityPerRelay: Int {
        maxInFlight + finishing(within: inFlightSpan) + finishing(within: commitInterval + handOff + rebalanceNotice)
    }

    /// Terms 1–3 for the whole group, from the feed alone: what it can have taken from Kafka within
    /// `window + inFlightSpan`.
    var fed: Int { feed.backlog + feed.produced(within: window + inFlightSpan) }

    /// Redone events for one disruption that revokes (or kills) `members` relays: the smaller cap.
    /// - Parameter piledUp: events waiting beyond `feed.backlog` at this disruption (what the test's own
    ///   schedule let pile up before it: an outage's input, a dead member's partitions until they move).
    func perDisruption(members: Int, piledUp: Int = 0) -> Int { min(max(1, members) * capacityPerRelay, fed + piledUp) }

    /// The bound for `disruptions` disruptions of one relay each (kills).
    func kills(_ disruptions: Int) -> Int { disruptions * perDisruption(members: 1) }

    /// The bound for a sequence of membership changes, given how many relays were in the group at each
    /// (each of them is revoked and redoes its share).
    func changes(membersPerChange: [Int]) -> Int { membersPerChange.reduce(0) { $0 + perDisruption(members: $1) } }

    var description: String {
        "per disruption the smaller of \(capacityPerRelay) per relay (\(maxInFlight) in flight + \(finishing(within: inFlightSpan)) finished behind an unfinished one + \(finishing(within: commitInterval + handOff + rebalanceNotice)) stored and not yet committed) and \(fed) fed within \(window + inFlightSpan) (\(feed)); in-flight limit \(maxInFlight), APNs answer \(apnsLatency), commit interval \(commitInterval), rebalance notice \(rebalanceNotice), hand-off \(handOff)"
    }
}
