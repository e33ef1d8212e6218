import Testing

/// The soak's conclusions from its samples, against values worked out by hand.
struct SoakReportTests {
    /// A sample whose resources are those of the baseline below unless said otherwise: 20 threads of which
    /// 2 are libdispatch's (18 own), 50 descriptors of which 2 APNs and 6 Kafka sockets (42 others).
    static func sample(
        _ seconds: Double, produced: Int, results: Int, p99: Double, threads: Int = 20, apnsSockets: Int = 2
    ) -> SoakSample {
        SoakSample(
            seconds: seconds, pid: 1, rssMiB: 100, heapMiB: 50, fds: 50, apnsSockets: apnsSockets, kafkaSockets: 6,
            threads: threads, dispatchThreads: 2, connections: 2, p99Milliseconds: p99, produced: produced, results: results)
    }

    /// The short form (warm-up 15 s, its second half from 7.5 s; allowance 45 s). A fault from 20 s to 30 s:
    /// 3,000 produced by its end, results 2,400, 2,900, then 3,100 at 34 s (caught up 4 s after the end); own
    /// threads 19 until 36 s (back 6 s after); p99 peaks at 900 ms within 20–34 s. A kill from 40 s to 41 s:
    /// 4,000 produced by 40 s, results never past 3,900 within the allowance.
    @Test func recoveryIsJudgedByTheResultsCatchingUp() throws {
        let plan = SoakPlan(full: false, minutes: 2.5)
        var samples = [8.0, 10, 12, 14].map { Self.sample($0, produced: Int($0) * 100, results: Int($0) * 100, p99: 50) }
        samples += [
            Self.sample(20, produced: 2_000, results: 2_000, p99: 60),
            Self.sample(30, produced: 3_000, results: 2_400, p99: 900, threads: 21),
            Self.sample(32, produced: 3_200, results: 2_900, p99: 400, threads: 21),
            Self.sample(34, produced: 3_400, results: 3_100, p99: 80, threads: 21),
            Self.sample(36, produced: 3_600, results: 3_600, p99: 70),
            Self.sample(40, produced: 4_000, results: 3_600, p99: 70),
            Self.sample(50, produced: 5_000, results: 3_900, p99: 70),
        ]
        let report = SoakReport(plan: plan, samples: samples, faults: [
            .init(fault: .apnsGoAway, start: 20, end: 30, effect: "GOAWAYs sent"),
            .init(fault: .relayKilled, start: 40, end: 41, effect: "a new pid"),
        ])
        let baseline = try #require(report.baseline)
        #expect(baseline.ownThreads == 18 && baseline.otherFds == 42 && baseline.p99 == 50)
        let goAway = report.recoveries[0]
        #expect(goAway.producedByEnd == 3_000)
        #expect(goAway.caughtUpAfter == 4)
        #expect(goAway.resourcesBackAfter == 6)
        #expect(goAway.p99Peak == 900)
        let kill = report.recoveries[1]
        #expect(kill.producedByEnd == 4_000)
        #expect(kill.caughtUpAfter == nil)
    }

    /// Back means no more own threads or other descriptors than the baseline, and no APNs socket beyond the
    /// pool's connections: 3 sockets for 2 connections is a leak.
    @Test func resourcesAreBackOnlyWithoutALeakedSocket() {
        let plan = SoakPlan(full: false, minutes: 2.5)
        let baseline = SoakReport.Baseline(ownThreads: 18, otherFds: 42, rssMiB: 100, heapMiB: 50, p99: 50)
        #expect(SoakReport.isBack(Self.sample(1, produced: 0, results: 0, p99: 0), baseline: baseline, plan: plan))
        #expect(!SoakReport.isBack(Self.sample(1, produced: 0, results: 0, p99: 0, apnsSockets: 3), baseline: baseline, plan: plan))
        #expect(!SoakReport.isBack(Self.sample(1, produced: 0, results: 0, p99: 0, threads: 21), baseline: baseline, plan: plan))
    }

    /// Growth is the median of the last quarter less that of the first: of 1…8, the quarters are [1, 2] and
    /// [7, 8], medians (the upper middle) 2 and 8, so 6. Fewer than 8 values give none.
    @Test func growthComparesTheQuartersMedians() {
        #expect(SoakReport.growth([1, 2, 3, 4, 5, 6, 7, 8]) == 6)
        #expect(SoakReport.growth([1, 2, 3, 4, 5, 6, 7]) == nil)
    }

    /// One unit per half hour is 2 per hour; a flat line 0.
    @Test func slopeIsPerHour() {
        #expect(SoakReport.slopePerHour([(0, 0), (1_800, 1), (3_600, 2)]) == 2)
        #expect(SoakReport.slopePerHour([(0, 5), (1_800, 5), (3_600, 5)]) == 0)
        #expect(SoakReport.slopePerHour([(0, 5), (1_800, 5)]) == nil)
    }
}
