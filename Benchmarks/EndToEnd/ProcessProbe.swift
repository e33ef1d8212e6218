import Foundation

/// CPU time and memory of another process, from /proc (Linux).
struct ProcessProbe {
    let pid: Int32
    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// utime + stime in seconds (fields 14 and 15 of /proc/<pid>/stat).
    var cpuSeconds: Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)" the fields start at 3 (state): utime is field 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Self.ticksPerSecond
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
