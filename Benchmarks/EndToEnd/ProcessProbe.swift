import Foundation

/// CPU time and memory of another process, from /proc (Linux).
struct ProcessProbe {
    let pid: Int32
    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// utime + stime in seconds (fields 14 and 15 of /proc/<pid>/stat).
    var cpuSeconds: Double? { Self.stat("/proc/\(pid)/stat")?.cpuSeconds }

    /// The name (`comm`) and utime + stime in seconds of a /proc `stat` file (a process's or a thread's).
    private static func stat(_ path: String) -> (name: String, cpuSeconds: Double)? {
        guard let stat = try? String(contentsOfFile: path, encoding: .utf8),
            let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)" the fields start at 3 (state): utime is field 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (String(stat[stat.index(after: open)..<close]), (user + system) / ticksPerSecond)
    }

    /// CPU seconds of every thread alive now, summed by thread name (`comm`: librdkafka's are `rdk:…`).
    var threadCPUSeconds: [String: Double]? {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        var byName: [String: Double] = [:]
        for task in tasks {
            guard let thread = Self.stat("/proc/\(pid)/task/\(task)/stat") else { continue }  // it exited meanwhile
            byName[thread.name, default: 0] += thread.cpuSeconds
        }
        return byName
    }

    /// VmRSS and VmHWM (peak) in MiB.
    var memoryMiB: (rss: Double, peak: Double)? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        func value(_ name: String) -> Double? {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
            return line.split(separator: " ").dropFirst().first.flatMap { Double($0) }.map { $0 / 1024 }
        }
        guard let rss = value("VmRSS"), let peak = value("VmHWM") else { return nil }
        return (rss, peak)
    }

    /// `Threads:` of /proc/<pid>/status: the threads alive now.
    var threads: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        return Self.field("Threads", in: status)
    }

    /// Context switches of every thread alive now, summed over /proc/<pid>/task/*/status
    /// (/proc/<pid>/status counts the main thread's only).
    ///
    /// A thread that exits between two samples takes its switches with it: the difference of two samples
    /// then lacks everything that thread did (the switches it had at the first sample are even subtracted).
    /// The relay's busy threads (connection I/O, librdkafka's, the poll threads) live as long as it does;
    /// idle workers of the cooperative pool can come and go, so a difference is a slight undercount.
    var contextSwitches: ContextSwitches? {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        var total = ContextSwitches(voluntary: 0, involuntary: 0)
        for task in tasks {
            // A thread can exit between the listing and the read: it is skipped (see above).
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { continue }
            total.voluntary += Self.field("voluntary_ctxt_switches", in: status) ?? 0
            total.involuntary += Self.field("nonvoluntary_ctxt_switches", in: status) ?? 0
        }
        return total
    }

    /// Voluntary (the thread blocked: a futex, a poll, I/O) and involuntary (preempted) context switches.
    struct ContextSwitches {
        var voluntary: Int
        var involuntary: Int

        static func - (after: ContextSwitches, before: ContextSwitches) -> ContextSwitches {
            ContextSwitches(voluntary: after.voluntary - before.voluntary, involuntary: after.involuntary - before.involuntary)
        }

        /// "V / I" per event, for a row.
        func perEvent(_ events: Int) -> String {
            let count = Double(max(1, events))
            return "\(f(Double(voluntary) / count, 2)) / \(f(Double(involuntary) / count, 2))"
        }
    }

    /// The integer after `name:` in a /proc status file.
    private static func field(_ name: String, in status: String) -> Int? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap { Int($0) }
    }
}

/// Context switches of this process's waited-for children (getrusage RUSAGE_CHILDREN): a child's figure
/// includes its own waited-for children and its threads that exited, so the difference around
/// ``runMeasured(_:)`` is what a floor's tools (kcat, h2load) switched, none lost.
func childrenContextSwitches() -> ProcessProbe.ContextSwitches {
    var usage = rusage()
    getrusage(RUSAGE_CHILDREN.rawValue, &usage)  // Swift imports the constant as an enum, glibc takes an int
    return ProcessProbe.ContextSwitches(voluntary: usage.ru_nvcsw, involuntary: usage.ru_nivcsw)
}

/// Runs a shell command line and reports the CPU time its children used (bash's `times` builtin), so
/// short-lived tools (h2load, kcat) are measured without racing their exit.
func runMeasured(_ commandLine: String) throws -> (output: String, cpuSeconds: Double) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    let marker = "--cpu-times--"
    process.arguments = ["-c", "\(commandLine)\necho \(marker)\ntimes"]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.standardError
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard let range = output.range(of: marker) else { throw BenchmarkError("no CPU times from: \(commandLine)") }
    // `times` prints the shell's own times, then its children's: "0m1.234s 0m0.567s".
    let lines = output[range.upperBound...].split(separator: "\n")
    guard lines.count >= 2 else { throw BenchmarkError("unexpected `times` output: \(lines)") }
    let seconds = lines[1].split(separator: " ").map { part -> Double in
        let text = part.dropLast()  // "s"
        let pieces = text.split(separator: "m")
        return (Double(pieces.first ?? "0") ?? 0) * 60 + (Double(pieces.last ?? "0") ?? 0)
    }
    return (String(output[..<range.lowerBound]), seconds.reduce(0, +))
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
