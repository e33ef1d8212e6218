/// The most duplicate results a run's disruptions can cause, derived from the relay's configuration and the
/// mock APNs' fixed answer time alone — never from what the run measured (STYLE.md 15a).
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
/// Every event spends at least `apnsLatency` at APNs and at most `maxInFlight` are in flight, so at most
/// `maxInFlight × (T / apnsLatency + 1)` events finish within any time `T` (Little's law, per slot).
struct DuplicateBound: CustomStringConvertible {
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

    /// Events that can finish within `window`.
    func finishing(within window: Duration) -> Int {
        maxInFlight * (Int((window / apnsLatency).rounded(.up)) + 1)
    }

    /// Redone events per relay per disruption: terms 1–3 above.
    var perRelay: Int {
        maxInFlight + finishing(within: apnsLatency + handOff) + finishing(within: commitInterval + handOff + rebalanceNotice)
    }

    /// The bound for `disruptions` disruptions of one relay each (kills).
    func kills(_ disruptions: Int) -> Int { disruptions * perRelay }

    /// The bound for a sequence of membership changes, given how many relays were in the group at each
    /// (each of them is revoked and redoes its share).
    func changes(membersPerChange: [Int]) -> Int { membersPerChange.reduce(0) { $0 + max(1, $1) * perRelay } }

    var description: String {
        "\(perRelay) per relay per disruption: \(maxInFlight) in flight + \(finishing(within: apnsLatency + handOff)) finished behind an unfinished one + \(finishing(within: commitInterval + handOff + rebalanceNotice)) stored and not yet committed (in-flight limit \(maxInFlight), APNs answer \(apnsLatency), commit interval \(commitInterval), rebalance notice \(rebalanceNotice), hand-off \(handOff))"
    }
}
