import Foundation

/// The CPUs this process may use: the fewer of its affinity mask and its container's CPU limit.
///
/// `sysconf(_SC_NPROCESSORS_ONLN)` counts the node's cores: a pod limited to one CPU on a 64-core node would
/// size itself for 64. A Kubernetes CPU limit is a CFS quota on the container's cgroup — cgroup v2's
/// `cpu.max` (`"150000 100000"`: 1.5 CPUs; `"max 100000"`: none), v1's `cpu.cfs_quota_us` over
/// `cpu.cfs_period_us` (`-1`: none) — and a limit on any ancestor cgroup bounds it too. A fraction of a CPU
/// counts as a whole one (1.5 → 2), as a thread pool sized to it can keep that share busy.
package struct CPUBudget: Sendable, Equatable, CustomStringConvertible {
    /// A CFS bandwidth limit: `quota` microseconds of CPU time per `period`.
    package struct Quota: Sendable, Equatable {
        package var quota: Int
        package var period: Int
        /// The file it was read from, for the start-up log.
        package var source: String

        /// Whole CPUs, rounded up, at least one.
        package var cores: Int { max(1, (quota + period - 1) / period) }
    }

    /// Cores the kernel has online.
    package var online: Int
    /// CPUs in the affinity mask (`sched_getaffinity`), if it could be read.
    package var affinity: Int?
    /// The tightest CPU limit of the process's cgroup and its ancestors, if any.
    package var quota: Quota?

    /// What pools sized by the CPU count should use: the tightest of the three, at least one.
    package var cores: Int { max(1, min(online, affinity ?? online, quota?.cores ?? online)) }

    package var description: String {
        let limit = quota.map { "CPU limit \(Double($0.quota) / Double($0.period)) (\($0.source))" } ?? "no CPU limit"
        return "\(cores) CPUs: \(limit), affinity \(affinity.map(String.init) ?? "?") of \(online) online"
    }

    package init(online: Int, affinity: Int?, quota: Quota?) {
        self.online = online
        self.affinity = affinity
        self.quota = quota
    }

    /// This process's budget, read once (cgroup limits change only when the pod is resized, which restarts it
    /// under Kubernetes before 1.33 and is rare after).
    package static let current = CPUBudget.read()

    /// Reads the budget from `/proc/self/cgroup` and the cgroup file systems under `cgroupRoot`.
    /// - Parameters:
    ///   - procSelfCgroup: the text of `/proc/self/cgroup` (`nil`: read it).
    ///   - cgroupRoot: where the cgroup file systems are mounted (`/sys/fs/cgroup`).
    package static func read(
        procSelfCgroup: String? = nil, cgroupRoot: String = "/sys/fs/cgroup",
        online: Int = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), affinity: Int? = affinityCount()
    ) -> CPUBudget {
        let memberships = procSelfCgroup ?? (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? ""
        let quotas = cgroupPaths(memberships).compactMap { membership in
            tightestQuota(version: membership.version, path: membership.path, root: cgroupRoot)
        }
        return CPUBudget(online: max(1, online), affinity: affinity, quota: quotas.min { $0.cores < $1.cores })
    }

    /// CPUs in this process's affinity mask, from `/proc/self/status` (`Cpus_allowed_list: 0-3,8-11`; Glibc's
    /// `sched_getaffinity` is hidden from Swift behind `_GNU_SOURCE`).
    package static func affinityCount(procSelfStatus: String? = nil) -> Int? {
        guard let status = procSelfStatus ?? (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") })
        else { return nil }
        var count = 0
        for range in line.dropFirst("Cpus_allowed_list:".count).split(separator: ",") {
            let bounds = range.trimmingCharacters(in: .whitespaces).split(separator: "-").map { Int($0) }
            switch bounds.count {
            case 1: guard bounds[0] != nil else { return nil }; count += 1
            case 2:
                guard let low = bounds[0], let high = bounds[1], low <= high else { return nil }
                count += high - low + 1
            default: return nil
            }
        }
        return count > 0 ? count : nil
    }

    /// The cgroups `/proc/self/cgroup` names that can hold a CPU limit: the v2 one (`0::/path`) and the v1
    /// one with the `cpu` controller (`4:cpu,cpuacct:/path`).
    static func cgroupPaths(_ text: String) -> [(version: Int, path: String)] {
        text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { return nil }
            if fields[0] == "0", fields[1].isEmpty { return (2, String(fields[2])) }
            if fields[1].split(separator: ",").contains("cpu") { return (1, String(fields[2])) }
            return nil
        }
    }

    /// The tightest limit from the cgroup at `path` up to its hierarchy's root. Inside a container with its
    /// own cgroup namespace `path` is `/`; without one the container's cgroup is often mounted as the root
    /// while `path` names it from the host's: a path that is not there falls back to the mount's root.
    static func tightestQuota(version: Int, path: String, root: String) -> Quota? {
        let mounts = version == 2 ? [root] : ["\(root)/cpu", "\(root)/cpu,cpuacct", "\(root)/cpuacct,cpu"]
        guard let mount = mounts.first(where: { FileManager.default.fileExists(atPath: version == 2 ? "\($0)/cgroup.controllers" : "\($0)/cpu.cfs_period_us") })
        else { return nil }
        var components = path.split(separator: "/").map(String.init)
        if !FileManager.default.fileExists(atPath: ([mount] + components).joined(separator: "/")) { components = [] }
        var tightest: Quota?
        while true {
            let directory = ([mount] + components).joined(separator: "/")
            let found = version == 2
                ? (try? String(contentsOfFile: "\(directory)/cpu.max", encoding: .utf8)).flatMap { parseCPUMax($0, source: "\(directory)/cpu.max") }
                : parseCFS(
                    quota: try? String(contentsOfFile: "\(directory)/cpu.cfs_quota_us", encoding: .utf8),
                    period: try? String(contentsOfFile: "\(directory)/cpu.cfs_period_us", encoding: .utf8),
                    source: "\(directory)/cpu.cfs_quota_us")
            if let found, found.cores < tightest?.cores ?? .max { tightest = found }
            if components.isEmpty { return tightest }
            components.removeLast()
        }
    }

    /// cgroup v2 `cpu.max`: `"<quota|max> <period>"`.
    static func parseCPUMax(_ text: String, source: String) -> Quota? {
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count == 2, let quota = Int(fields[0]), let period = Int(fields[1]), quota > 0, period > 0 else { return nil }
        return Quota(quota: quota, period: period, source: source)
    }

    /// cgroup v1 `cpu.cfs_quota_us` (`-1`: no limit) and `cpu.cfs_period_us`.
    static func parseCFS(quota: String?, period: String?, source: String) -> Quota? {
        guard let quota = quota.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
              let period = period.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
              quota > 0, period > 0
        else { return nil }
        return Quota(quota: quota, period: period, source: source)
    }
}
