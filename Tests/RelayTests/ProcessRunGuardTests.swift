import Foundation
import ReaddirGuard
import Testing

/// Foundation's own directory listing (libFoundation's calls to readdir, as `Process.run` makes them) goes
/// through the test process's `ReaddirGuard` (see `Tests/ReaddirGuard/readdir_guard.c`).
@Suite struct ProcessRunGuardTests {
    @Test func foundationsReaddirCallsGoThroughTheGuard() throws {
        let before = readdir_guard_served()
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")
        #expect(!descriptors.isEmpty)
        #expect(readdir_guard_served() - before >= descriptors.count, "libFoundation's readdir is not the guard's")
    }
}
