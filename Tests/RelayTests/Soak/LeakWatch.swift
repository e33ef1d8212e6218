import Foundation
import Synchronization

/// One look at the relay under watch: its process from `/proc` (resident memory, file descriptors, threads),
/// its `/metrics` (C heap in use, consumer lag, events in flight, APNs connections, consume → result latency),
/// and the soak's own counts. A value the relay could not give (it was being restarted) is nil.
struct SoakSample: Sendable {
    var seconds: Double
    var pid: Int32
    var rssMiB: Double?
    var heapMiB: Double?
    var fds: Int?
    /// Of `fds`: TCP connections to the mock APNs, and to the Kafka brokers; the rest (files, pipes, epoll,
    /// eventfd, timerfd, listeners) is `otherFds`.
    var apnsSockets: Int?
    var kafkaSockets: Int?
    var threads: Int?
    /// Of `threads`: libdispatch's workers (Swift's global executor, Foundation's queues), which libdispatch
    /// starts and reaps on its own clock; the rest (`ownThreads`) are the relay's and librdkafka's.
    var dispatchThreads: Int?
    var lag: Double?
    var inFlight: Double?
    var connections: Double?
    /// p99 of the events that finished since the previous sample, from `apns_relay_event_latency_seconds`.
    var p99Milliseconds: Double?
    var produced: Int
    var results: Int

    var ownThreads: Int? {
        guard let threads, let dispatchThreads else { return nil }
        return threads - dispatchThreads
    }

    var otherFds: Int? {
        guard let fds, let apnsSockets, let kafkaSockets else { return nil }
        return fds - apnsSockets - kafkaSockets
    }

    static let csvHeader = "seconds,pid,rss_mib,heap_mib,fds,apns_sockets,kafka_sockets,threads,lag,in_flight,connections,p99_ms,produced,results,dispatch_threads"

    var csvLine: String {
        func text(_ value: Double?) -> String { value.map { String(format: "%.3f", $0) } ?? "" }
        func text(_ value: Int?) -> String { value.map(String.init) ?? "" }
        return [String(format: "%.1f", seconds), String(pid), text(rssMiB), text(heapMiB), text(fds), text(apnsSockets), text(kafkaSockets), text(threads), text(lag),
                text(inFlight), text(connections), text(p99Milliseconds), String(produced), String(results), text(dispatchThreads)].joined(separator: ",")
    }
}

/// Samples the relay under watch every period until cancelled.
struct LeakWatch: Sendable {
    /// The relay being watched: its pid and admin port (it changes when the relay is restarted).
    let target: @Sendable () -> (pid: Int32, adminPort: Int)
    let counts: @Sendable () -> (produced: Int, results: Int)
    /// The ports of the mock APNs and of the Kafka brokers, to tell the relay's connections apart.
    let apnsPorts: Set<Int>
    let kafkaPorts: Set<Int>
    let start: ContinuousClock.Instant
    let every: Duration

    /// - Returns: the samples, when the task running it is cancelled.
    func run() async -> [SoakSample] {
        var samples: [SoakSample] = []
        var previous: (pid: Int32, buckets: [(le: Double, count: Double)])?
        var next = start
        while !Task.isCancelled {
            let (pid, port) = target()
            var sample = SoakSample(seconds: (ContinuousClock.now - start).seconds, pid: pid, produced: 0, results: 0)
            (sample.produced, sample.results) = counts()
            if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) {
                sample.rssMiB = Self.statusField(status, "VmRSS").map { $0 / 1024 }
                sample.threads = Self.statusField(status, "Threads").map { Int($0) }
                sample.dispatchThreads = Self.threadNames(of: pid)?.filter(Self.isDispatchWorker).count
            }
            if let descriptors = Self.descriptors(of: pid) {
                sample.fds = descriptors.count
                let peers = Self.tcpPeers(of: pid)
                let remotePorts = descriptors.compactMap { $0.socketInode.flatMap { peers[$0] } }
                sample.apnsSockets = remotePorts.filter { apnsPorts.contains($0) }.count
                sample.kafkaSockets = remotePorts.filter { kafkaPorts.contains($0) }.count
            }
            if let body = try? await http("http://127.0.0.1:\(port)/metrics").body, !body.isEmpty {
                let metrics = MetricsText(body)
                sample.heapMiB = metrics.sum("apns_relay_heap_in_use_bytes").map { $0 / 1_048_576 }
                sample.lag = metrics.sum("apns_relay_consumer_lag")
                sample.inFlight = metrics.sum("apns_relay_events_in_flight")
                sample.connections = metrics.sum("apns_client_connections")
                let buckets = metrics.buckets("apns_relay_event_latency_seconds")
                // A restarted relay counts from zero: its first window is everything it has counted.
                let earlier = previous?.pid == pid ? previous?.buckets ?? [] : []
                sample.p99Milliseconds = Self.quantile(0.99, of: buckets, minus: earlier).map { $0 * 1000 }
                previous = (pid, buckets)
            }
            samples.append(sample)
            next += every
            // The watch's period: it samples a process that announces nothing.
            do { try await Task.sleep(until: next) } catch { break }
        }
        return samples
    }

    /// What each of the process's descriptors is (`socket:[inode]`, `pipe:[…]`, `anon_inode:[eventfd]`, a path).
    static func descriptors(of pid: Int32) -> [(target: String, socketInode: Int?)]? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return nil }
        return names.compactMap { name in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(name)") else { return nil }
            let inode = target.hasPrefix("socket:[") ? Int(target.dropFirst(8).dropLast()) : nil
            return (target, inode)
        }
    }

    /// The names of the process's threads (`/proc/<pid>/task/*/comm`).
    static func threadNames(of pid: Int32) -> [String]? {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// Whether a thread is one of libdispatch's workers: they are named after their root queue,
    /// `com.apple.root.<class>-qos[.overcommit]`, of which Linux keeps 15 characters (the tail:
    /// `oot.default-qos`, `-qos.overcommit`). No thread of the relay's or librdkafka's has "qos" in its name.
    static func isDispatchWorker(_ name: String) -> Bool { name.contains("qos") }

    /// The remote port of each connected TCP socket in the process's network namespace, by inode
    /// (`/proc/<pid>/net/tcp` and `tcp6`; listeners have none).
    static func tcpPeers(of pid: Int32) -> [Int: Int] {
        var peers: [Int: Int] = [:]
        for table in ["tcp", "tcp6"] {
            // Read to the end: procfs files report no size, and a read sized by it stops at the first page.
            guard let data = FileHandle(forReadingAtPath: "/proc/\(pid)/net/\(table)")?.readDataToEndOfFile() else { continue }
            let text = String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                guard fields.count > 9, fields[3] != "0A", let port = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
                      let inode = Int(fields[9]) else { continue }
                peers[inode] = port
            }
        }
        return peers
    }

    /// A `/proc/<pid>/status` field's number ("VmRSS:  1234 kB" → 1234).
    static func statusField(_ status: String, _ name: String) -> Double? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap { Double($0) }
    }

    /// The `q` quantile of the observations between two readings of a cumulative histogram, interpolated
    /// within its bucket as Prometheus's `histogram_quantile` does; nil without observations.
    static func quantile(_ q: Double, of buckets: [(le: Double, count: Double)], minus earlier: [(le: Double, count: Double)]) -> Double? {
        let before = Dictionary(earlier.map { ($0.le, $0.count) }, uniquingKeysWith: { $1 })
        let window = buckets.map { (le: $0.le, count: $0.count - (before[$0.le] ?? 0)) }
        guard let total = window.last?.count, total > 0 else { return nil }
        let rank = q * total
        var lower = (le: 0.0, count: 0.0)
        for bucket in window {
            if bucket.count >= rank {
                // The +Inf bucket: the highest finite bound is all the histogram can say.
                guard bucket.le.isFinite else { return lower.le }
                let share = bucket.count > lower.count ? (rank - lower.count) / (bucket.count - lower.count) : 1
                return lower.le + (bucket.le - lower.le) * share
            }
            lower = bucket
        }
        return lower.le
    }

    /// The histogram's bucket bound at or above `value`: the resolution its quantiles have.
    static func bucketEdge(above value: Double, in bounds: [Double]) -> Double {
        bounds.sorted().first { $0 >= value } ?? value
    }
}

/// A Prometheus text exposition, read just enough for the watch.
struct MetricsText {
    private var samples: [(name: Substring, labels: Substring, value: Double)] = []

    init(_ text: String) {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let series = line[..<space]
            if let brace = series.firstIndex(of: "{") {
                samples.append((series[..<brace], series[brace...], value))
            } else {
                samples.append((series, "", value))
            }
        }
    }

    /// The sum over every series of `name`; nil when there is none.
    func sum(_ name: String) -> Double? {
        let values = samples.filter { $0.name == name }.map(\.value)
        return values.isEmpty ? nil : values.reduce(0, +)
    }

    /// A histogram's cumulative buckets (`name_bucket{le="…"}`), in order of `le`.
    func buckets(_ name: String) -> [(le: Double, count: Double)] {
        samples.filter { $0.name == name + "_bucket" }.compactMap { sample -> (le: Double, count: Double)? in
            guard let match = sample.labels.firstMatch(of: /le="([^"]+)"/) else { return nil }
            let bound = match.output.1 == "+Inf" ? Double.infinity : Double(match.output.1)
            return bound.map { ($0, sample.value) }
        }.sorted { $0.le < $1.le }
    }
}
