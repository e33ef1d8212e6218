#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Keeps starting child processes apart from socket changes that a child must not catch half-way.
///
/// A child holds a copy of every descriptor of its parent from its fork until its exec closes the
/// close-on-exec ones — and the parent's `posix_spawn` returns before that: the kernel wakes the parent
/// when the child releases its memory, before it closes those descriptors. librdkafka 2.0.2's mock broker,
/// going down, closes its listener and binds the same port again at once, and aborts the whole process when
/// the port is still in use — which it is while a child still holds the old listener (reproduced: a broker
/// set down and up while processes start aborts within the first rounds).
///
/// `MockKafkaCluster.setBrokerDown(_:)` runs under ``withLock(_:)``; code that starts processes in a process
/// whose mock brokers go down (the tests) starts them with ``starting(_:)``, which holds the lock until the
/// child has closed its inherited descriptors (or exited).
package enum ForkGuard {
    private static let lock = Mutex<Void>(())

    package static func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        try lock.withLock { _ throws(E) -> T in try body() }
    }

    /// Runs `start`, which starts (at most) one child process, and returns once that child has closed the
    /// descriptors it inherited on exec, or has exited.
    ///
    /// How it knows: a close-on-exec pipe whose write end sits above every other descriptor. A child closes
    /// its close-on-exec descriptors in increasing order, so the end of that pipe is read only after the
    /// child closed every one below it.
    package static func starting<T, E: Error>(_ start: () throws(E) -> T) throws(E) -> T {
        try lock.withLock { _ throws(E) -> T in
            let sentinel = Sentinel()
            defer { sentinel?.waitForChild() }
            return try start()
        }
    }

    /// The pipe, its write end moved to the highest descriptor number the process may open (capped at 65535:
    /// a larger number would grow the descriptor table for nothing).
    private struct Sentinel {
        let readEnd: Int32
        let writeEnd: Int32

        init?() {
            var ends: [Int32] = [0, 0]
            // Every start holds the lock, so no child can catch these before they are close-on-exec.
            guard pipe(&ends) == 0 else { return nil }
            _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
            var limit = rlimit()
            #if canImport(Glibc)
            getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            #else
            getrlimit(RLIMIT_NOFILE, &limit)
            #endif
            let highest = Int32(clamping: min(UInt64(limit.rlim_cur), 1 << 16)) - 1
            // Only the highest number will do: anywhere lower, a descriptor above it could outlive it.
            let moved = highest > ends[1] ? fcntl(ends[1], F_DUPFD_CLOEXEC, highest) : -1
            close(ends[1])
            guard moved == highest else {
                if moved >= 0 { close(moved) }
                close(ends[0])
                return nil
            }
            readEnd = ends[0]
            writeEnd = moved
        }

        /// Closes this process's write end, then reads until end of file: the child closed its copy too.
        func waitForChild() {
            close(writeEnd)
            var byte: UInt8 = 0
            while read(readEnd, &byte, 1) < 0, errno == EINTR {}
            close(readEnd)
        }
    }
}
