import Foundation
import ServiceSupport
import Testing

/// The budget read from cgroup file systems laid out in a temporary folder as the kernel lays them out
/// (cgroup v2's `cpu.max`, v1's `cpu.cfs_quota_us`/`cpu.cfs_period_us`), with `/proc/self/cgroup` as text.
@Suite struct CPUBudgetTests {
    private func withCgroups(_ files: [String: String], _ body: (String) throws -> Void) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cgroup-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        for (path, text) in files {
            let file = "\(root)/\(path)"
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: file, atomically: false, encoding: .utf8)
        }
        try body(root)
    }

    @Test func aKubernetesLimitOfOneAndAHalfCPUsOnA64CoreNodeIsTwo() throws {
        // A container with its own cgroup namespace: its cgroup is the root; `resources.limits.cpu: 1500m`.
        try withCgroups(["cgroup.controllers": "cpuset cpu io memory pids\n", "cpu.max": "150000 100000\n"]) { root in
            let budget = CPUBudget.read(procSelfCgroup: "0::/\n", cgroupRoot: root, online: 64, affinity: 64)
            #expect(budget.cores == 2)
            #expect(budget.quota?.source == "\(root)/cpu.max")
            #expect(budget.description == "2 CPUs: CPU limit 1.5 (\(root)/cpu.max), affinity 64 of 64 online")
        }
    }

    @Test func noLimitLeavesTheAffinityMask() throws {
        try withCgroups(["cgroup.controllers": "cpu\n", "cpu.max": "max 100000\n"]) { root in
            let budget = CPUBudget.read(procSelfCgroup: "0::/\n", cgroupRoot: root, online: 64, affinity: 6)
            #expect(budget.quota == nil)
            #expect(budget.cores == 6)
        }
    }

    @Test func anAncestorsLimitBoundsTheProcesssCgroup() throws {
        // No cgroup namespace: /proc/self/cgroup names the pod's container from the host's root.
        let pod = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
        try withCgroups([
            "cgroup.controllers": "cpu\n",
            "\(pod)/cpu.max": "100000 100000\n",
            "\(pod)/cri-containerd-abc.scope/cpu.max": "max 100000\n",
        ]) { root in
            let budget = CPUBudget.read(procSelfCgroup: "0::/\(pod)/cri-containerd-abc.scope\n", cgroupRoot: root, online: 32, affinity: 32)
            #expect(budget.cores == 1)
            #expect(budget.quota?.source == "\(root)/\(pod)/cpu.max")
        }
    }

    @Test func cgroupV1sQuotaIsRead() throws {
        try withCgroups(["cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"]) { root in
            let budget = CPUBudget.read(
                procSelfCgroup: "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n", cgroupRoot: root, online: 16, affinity: 16)
            #expect(budget.cores == 3)
        }
    }

    @Test func cgroupV1sMinusOneIsNoLimit() throws {
        try withCgroups(["cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"]) { root in
            let budget = CPUBudget.read(procSelfCgroup: "4:cpu:/\n", cgroupRoot: root, online: 8, affinity: 8)
            #expect(budget.quota == nil)
            #expect(budget.cores == 8)
        }
    }

    @Test func aNarrowerAffinityMaskBeatsALimit() throws {
        try withCgroups(["cgroup.controllers": "cpu\n", "cpu.max": "400000 100000\n"]) { root in
            #expect(CPUBudget.read(procSelfCgroup: "0::/\n", cgroupRoot: root, online: 64, affinity: 2).cores == 2)
        }
    }

    @Test func aLimitBelowOneCPUIsOne() throws {
        try withCgroups(["cgroup.controllers": "cpu\n", "cpu.max": "25000 100000\n"]) { root in
            #expect(CPUBudget.read(procSelfCgroup: "0::/\n", cgroupRoot: root, online: 4, affinity: 4).cores == 1)
        }
    }

    @Test func theAffinityListCountsEachRange() {
        #expect(CPUBudget.affinityCount(procSelfStatus: "Name:\ttest\nCpus_allowed:\tf0f\nCpus_allowed_list:\t0-3,8-11\n") == 8)
        #expect(CPUBudget.affinityCount(procSelfStatus: "Cpus_allowed_list:\t5\n") == 1)
        #expect(CPUBudget.affinityCount(procSelfStatus: "Cpus_allowed_list:\t3-1\n") == nil)
        #expect(CPUBudget.affinityCount(procSelfStatus: "Name:\ttest\n") == nil)
    }

    @Test func thisProcesssAffinityIsReadFromTheKernel() {
        let count = CPUBudget.affinityCount()
        #expect(count.map { $0 >= 1 && $0 <= Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) } == true)
    }
}
