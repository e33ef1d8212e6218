import Foundation
import ServiceSupport

/// What the soak concludes from its samples: the baseline, each fault's recovery, the memory of the second
/// half; and the files it leaves (`samples.csv`, `faults.csv`, `summary.txt`; `soak.png` is drawn from them by
/// Tests/soak/plot.py).
struct SoakReport {
    struct FaultRecord: Sendable {
        var fault: SoakPlan.Fault
        var start: Double
        var end: Double
        /// What showed that the fault happened, seen from outside the command that caused it (a new pid, a
        /// refused /readyz, counters of the mock that moved); nil if it did not show.
        var effect: String?
    }

    struct Recovery {
        var record: FaultRecord
        /// Seconds after the fault's end until the relay's resources were back at the baseline (`isBack`);
        /// nil: not within the allowance.
        var resourcesBackAfter: Double?
        /// Events produced by the fault's end (the last sample at or before it).
        var producedByEnd: Int?
        /// Seconds after the fault's end until the results reached `producedByEnd`: the relay made up what
        /// the fault held back. nil: not within the allowance.
        var caughtUpAfter: Double?
        /// The highest p99 from the fault's start until it caught up (or the allowance ended), ms: reported,
        /// not judged (a latency measures the machine as much as the relay).
        var p99Peak: Double?
    }

    struct Baseline {
        /// Threads other than libdispatch's workers (``SoakSample/ownThreads``).
        var ownThreads: Int
        /// File descriptors other than connections to APNs and Kafka (whose numbers follow the load and the
        /// cluster, and are checked on their own).
        var otherFds: Int
        var rssMiB: Double
        var heapMiB: Double
        /// The highest p99 of the warm-up's second half, ms.
        var p99: Double
    }

    let plan: SoakPlan
    let samples: [SoakSample]
    let faults: [FaultRecord]
    let baseline: Baseline?
    let recoveries: [Recovery]
    /// The second half's memory: least-squares slopes, MiB per hour, and growth, MiB (the median of its last
    /// quarter less that of its first, which a burst of work at either end does not move).
    let rssSlope: Double?
    let heapSlope: Double?
    let rssGrowth: Double?
    let heapGrowth: Double?

    init(plan: SoakPlan, samples: [SoakSample], faults: [FaultRecord]) {
        self.plan = plan
        self.samples = samples
        self.faults = faults
        let warmUp = plan.warmUp.seconds
        let settled = samples.filter { $0.seconds >= warmUp / 2 && $0.seconds < warmUp }
        var baseline: Baseline?
        if let threads = Self.median(settled.compactMap(\.ownThreads)), let fds = Self.median(settled.compactMap(\.otherFds)),
           let rss = Self.median(settled.compactMap(\.rssMiB)), let heap = Self.median(settled.compactMap(\.heapMiB)),
           let p99 = settled.compactMap(\.p99Milliseconds).max() {
            baseline = Baseline(ownThreads: threads, otherFds: fds, rssMiB: rss, heapMiB: heap, p99: p99)
        }
        self.baseline = baseline
        let allowance = plan.recoveryAllowance.seconds
        recoveries = faults.map { record in
            var recovery = Recovery(record: record)
            let after = samples.filter { $0.seconds >= record.end && $0.seconds <= record.end + allowance }
            if let baseline {
                recovery.resourcesBackAfter = after.first { Self.isBack($0, baseline: baseline, plan: plan) }.map { $0.seconds - record.end }
            }
            if let produced = samples.last(where: { $0.seconds <= record.end })?.produced {
                recovery.producedByEnd = produced
                recovery.caughtUpAfter = after.first { $0.results >= produced }.map { $0.seconds - record.end }
            }
            let until = record.end + (recovery.caughtUpAfter ?? allowance)
            recovery.p99Peak = samples.filter { $0.seconds >= record.start && $0.seconds <= until }.compactMap(\.p99Milliseconds).max()
            return recovery
        }
        let secondHalf = samples.filter { $0.seconds >= plan.duration.seconds / 2 && $0.seconds <= plan.duration.seconds }
        let lastPID = secondHalf.last?.pid
        let oneProcess = secondHalf.filter { $0.pid == lastPID }
        let rss = oneProcess.compactMap { sample in sample.rssMiB.map { (sample.seconds, $0) } }
        let heap = oneProcess.compactMap { sample in sample.heapMiB.map { (sample.seconds, $0) } }
        rssSlope = Self.slopePerHour(rss)
        heapSlope = Self.slopePerHour(heap)
        rssGrowth = Self.growth(rss.map(\.1))
        heapGrowth = Self.growth(heap.map(\.1))
    }

    /// Whether the relay's resources are back where they were before the faults: no more threads of its own
    /// or librdkafka's (a process may run one fewer: the first 65-minute soak's relay had 22 threads
    /// throughout, its restarted successor 21, and "the same number" failed every fault on that), no more of
    /// libdispatch's workers than ``SoakPlan/dispatchThreadBound`` (their number follows the load: 1 to 4 in
    /// one 150 s run on 2 cores, and a count of all threads failed a run on that alone), no more descriptors
    /// other than connections, no more Kafka connections than its two clients hold at most, and no APNs
    /// socket beyond the pool's connections (a socket left open after its connection closed is a leak).
    static func isBack(_ sample: SoakSample, baseline: Baseline, plan: SoakPlan) -> Bool {
        guard let own = sample.ownThreads, let dispatch = sample.dispatchThreads, let other = sample.otherFds,
              let kafka = sample.kafkaSockets, let apns = sample.apnsSockets, let connections = sample.connections else { return false }
        return own <= baseline.ownThreads && dispatch <= plan.dispatchThreadBound && other <= baseline.otherFds
            && kafka <= plan.kafkaSocketBound && Double(apns) <= connections
    }

    static func median<T: Comparable>(_ values: [T]) -> T? { values.isEmpty ? nil : values.sorted()[values.count / 2] }

    /// The median of the last quarter less the median of the first.
    static func growth(_ values: [Double]) -> Double? {
        guard values.count >= 8 else { return nil }
        let quarter = values.count / 4
        guard let first = median(Array(values.prefix(quarter))), let last = median(Array(values.suffix(quarter))) else { return nil }
        return last - first
    }

    /// Least squares, in units per hour.
    static func slopePerHour(_ points: [(Double, Double)]) -> Double? {
        guard points.count >= 3 else { return nil }
        let n = Double(points.count)
        let meanX = points.map(\.0).reduce(0, +) / n
        let meanY = points.map(\.1).reduce(0, +) / n
        let covariance = points.map { ($0.0 - meanX) * ($0.1 - meanY) }.reduce(0, +)
        let variance = points.map { ($0.0 - meanX) * ($0.0 - meanX) }.reduce(0, +)
        return variance > 0 ? covariance / variance * 3600 : nil
    }

    /// Writes the CSVs and the summary into `directory`.
    func write(to directory: URL, summary: String) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try ([SoakSample.csvHeader] + samples.map(\.csvLine)).joined(separator: "\n").appending("\n")
            .write(to: directory.appendingPathComponent("samples.csv"), atomically: true, encoding: .utf8)
        try (["fault,start_s,end_s"] + faults.map { "\($0.fault.rawValue),\(String(format: "%.1f", $0.start)),\(String(format: "%.1f", $0.end))" })
            .joined(separator: "\n").appending("\n")
            .write(to: directory.appendingPathComponent("faults.csv"), atomically: true, encoding: .utf8)
        try summary.write(to: directory.appendingPathComponent("summary.txt"), atomically: true, encoding: .utf8)
    }

    /// One row per fault, for the summary.
    var faultTable: String {
        func ms(_ value: Double?) -> String { value.map { String(format: "%.0f", $0) } ?? "–" }
        func s(_ value: Double?) -> String { value.map { String(format: "%.0f s", $0) } ?? "not within \(Int(plan.recoveryAllowance.seconds)) s" }
        var rows = [
            "| fault | at | for | seen | threads and descriptors back after | results caught up after | peak p99 (ms) |",
            "|---|---|---|---|---|---|---|",
        ]
        for recovery in recoveries {
            let record = recovery.record
            rows.append(
                "| \(record.fault.rawValue) | \(String(format: "%.0f s", record.start)) | \(String(format: "%.0f s", record.end - record.start)) | \(record.effect ?? "not seen") | \(s(recovery.resourcesBackAfter)) | \(s(recovery.caughtUpAfter)) | \(ms(recovery.p99Peak)) |")
        }
        return rows.joined(separator: "\n")
    }
}
