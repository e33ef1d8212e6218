import Foundation
import ServiceSupport

/// How long the soak runs, how often it looks, and when each fault comes.
///
/// `make soak` sets `APNS_RELAY_SOAK_MINUTES` (default 65: two provider-token rotations at the default 30-minute
/// epoch, each crossed by connections that hold a token 21 minutes); `make test` runs the short form, 150 s with
/// the same faults shortened, sampled every 2 s.
struct SoakPlan: Sendable, CustomStringConvertible {
    enum Fault: String, Sendable, CaseIterable {
        case relayKilled = "relay SIGKILLed and restarted"
        case kafkaUnreachable = "Kafka unreachable"
        case brokerDown = "a broker down and back"
        case leaderMove = "partition leaders moved"
        case relayJoins = "a second relay joins"
        case relayLeaves = "the second relay leaves"
        case apnsGoAway = "APNs GOAWAY"
        case apnsStorm = "APNs 429/500/503 storm"
        case connectionResets = "APNs connections reset"
        case slowAnswers = "APNs answers slowly"
    }

    struct Step: Sendable {
        var fault: Fault
        /// From the soak's start.
        var at: Duration
        /// Zero for a fault that is one act (a kill, a move, a join).
        var length: Duration
    }

    let full: Bool
    let duration: Duration
    /// Half an hour or more: the second half's memory is judged by its slope; shorter, by its growth.
    var measuresSlope: Bool { duration >= .seconds(30 * 60) }
    /// The leak watch's period.
    let sampleEvery: Duration
    /// Bulk events per second (plus two urgent ones).
    let rate: Int
    /// The mock APNs' answer time outside the slow-answers fault.
    let apnsRoundTrip: Duration = .milliseconds(40)
    /// How long after a fault ends the relay has to be back at its baseline: threads and file descriptors as
    /// before the first fault, and results for every event produced by the fault's end. Long enough for
    /// librdkafka to reconnect (its backoff grows to 10 s), for a consumer group to settle after a member
    /// comes or goes (`kafka.sessionTimeoutMs`: 45 s by default, 6 s in the short form) and for the backlog of
    /// an outage to drain; in the short form, which shares two cores with the rest of `make test`, 45 s (a CI
    /// run took 20 s after the Kafka outage, local runs 8–16 s).
    let recoveryAllowance: Duration
    /// The samples before this are the warm-up; the baseline is the median of its second half.
    let warmUp: Duration
    let schedule: [Step]

    static var current: SoakPlan {
        if let text = ProcessInfo.processInfo.environment["APNS_RELAY_SOAK_MINUTES"], let minutes = Double(text), minutes > 0 {
            return SoakPlan(full: true, minutes: minutes)
        }
        return SoakPlan(full: false, minutes: 2.5)
    }

    init(full: Bool, minutes: Double) {
        self.full = full
        duration = .milliseconds(Int64(minutes * 60_000))
        // Timings scale with the run, so that a shorter `SOAK_MINUTES` still fits its faults: 65 minutes give
        // 10 s samples and a minute per fault; the 150-second form 2 s samples and 5–10 s faults.
        func clamp(_ value: Duration, _ low: Duration, _ high: Duration) -> Duration { min(high, max(low, value)) }
        let total = duration
        sampleEvery = clamp(total / 390, .seconds(2), .seconds(10))
        rate = 100
        recoveryAllowance = full ? .seconds(120) : .seconds(45)
        warmUp = total * 0.1
        let faultLength = clamp(total / 26, .seconds(5), .seconds(60))
        let outage = clamp(total / 15, .seconds(10), .seconds(60))
        // The restarts come first and the second half holds only faults the process lives through, so the
        // memory slope of the second half is one process's.
        let steps: [(Fault, Double, Duration)] = [
            (.relayKilled, 0.12, .zero), (.kafkaUnreachable, 0.20, outage), (.brokerDown, 0.30, faultLength),
            (.leaderMove, 0.36, .zero), (.relayJoins, 0.42, .zero), (.relayLeaves, 0.48, .zero),
            (.apnsGoAway, 0.55, faultLength), (.apnsStorm, 0.61, faultLength), (.connectionResets, 0.67, faultLength),
            (.slowAnswers, 0.73, faultLength),
        ]
        schedule = steps.map { Step(fault: $0.0, at: total * $0.1, length: $0.2) }
    }

    /// The relay's settings beyond the sandbox's: defaults wherever the run allows, shortened intervals in the
    /// short form so that what happens after minutes at the defaults happens within it.
    func relaySettings(adminPort: Int) -> [String: String] {
        var settings = [
            "admin.host": "127.0.0.1", "admin.port": String(adminPort),
            "log.level": "warning",
            "relay.maxInFlightEvents": String(maxInFlight),
            "kafka.autoCommitIntervalMs": String(commitInterval.milliseconds),
            "kafka.sessionTimeoutMs": String(sessionTimeout.milliseconds),
            "kafka.statisticsIntervalMs": full ? "15000" : "2000",
        ]
        if !full {
            // Idle pools close during the Kafka outage and reopen after it; metadata refreshes every 5 s, not 5 min.
            settings["apns.pool.idleTimeoutMs"] = "4000"
            settings["kafka.properties"] = "topic.metadata.refresh.interval.ms=5000"
        }
        return settings
    }

    /// Brokers of the soak's cluster.
    let brokers = 3
    /// The most Kafka connections the relay's two clients (consumer, producer) hold: one per broker and one
    /// per bootstrap address each.
    var kafkaSocketBound: Int { 2 * (brokers + brokers) }
    /// The most libdispatch workers the relay may run: Swift's global executor takes at most one per core,
    /// and queues that block (Foundation's, timers) add overcommit workers; four per core leaves room for
    /// those and still catches workers that pile up blocked.
    var dispatchThreadBound: Int { 4 * ProcessInfo.processInfo.activeProcessorCount }

    let maxInFlight = 500
    let commitInterval: Duration = .seconds(1)

    /// `kafka.sessionTimeoutMs`.
    var sessionTimeout: Duration { full ? .seconds(45) : .seconds(6) }

    /// What the soak feeds: `rate / 10` bulk events every 100 ms and an urgent one every 500 ms, at most
    /// `rate + 2` per second, with one batch of each (`rate / 10 + 1`) waiting at any moment the relay keeps up.
    var feed: DuplicateBound.Feed { .init(events: rate + 2, per: .seconds(1), backlog: rate / 10 + 1) }

    /// The duplicates the run's disruptions can explain, from the settings and the feed above (the fault
    /// suite's bound). Each disruption redoes at most what the relays were fed within its window and
    /// in-flight span (`DuplicateBound.fed`: 11 + ⌈102 × 4.24⌉ = 444 at 3 s heartbeats, 1 s commits and 40 ms
    /// answers), plus what the schedule let pile up before it:
    /// - the kill (one relay), the join and the leave (two relays revoked each): nothing piled up;
    /// - the restarted relay's rejoin, once the killed member's session has expired: that member's
    ///   partitions were consumed by nobody for up to `sessionTimeout`;
    /// - the Kafka outage: everything produced during it (the test's producer holds it until the brokers
    ///   are back); the broker outage: everything produced during it, as if all of it were on that broker.
    /// The relays' capacity (55,000 per relay per disruption, 440,000 for the run) is far above both.
    var duplicateBound: (bound: DuplicateBound, total: Int) {
        let bound = DuplicateBound(
            maxInFlight: maxInFlight, apnsLatency: apnsRoundTrip, commitInterval: commitInterval, rebalanceNotice: .seconds(3), feed: feed)
        func length(_ fault: Fault) -> Duration { schedule.first { $0.fault == fault }?.length ?? .zero }
        let total = bound.kills(1) + bound.changes(membersPerChange: [2, 2])
            + bound.perDisruption(members: 1, piledUp: feed.produced(within: sessionTimeout))
            + bound.perDisruption(members: 1, piledUp: feed.produced(within: length(.kafkaUnreachable)))
            + bound.perDisruption(members: 1, piledUp: feed.produced(within: length(.brokerDown)))
        return (bound, total)
    }

    var description: String {
        "soak: \(full ? "full" : "short") form, \(duration.seconds) s, \(rate) bulk + 2 urgent events/s, samples every \(sampleEvery.seconds) s, APNs answers in \(apnsRoundTrip.milliseconds) ms; faults: "
            + schedule.map { "\($0.fault.rawValue) at \(Int($0.at.seconds)) s\($0.length > .zero ? " for \(Int($0.length.seconds)) s" : "")" }.joined(separator: ", ")
    }
}
