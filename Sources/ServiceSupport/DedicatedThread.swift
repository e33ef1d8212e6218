import Glibc
import Synchronization

/// Starts detached, named POSIX threads for blocking work: librdkafka's blocking calls, the APNs event
/// loops, connects (glibc has no non-blocking DNS). Never Swift's cooperative pool, whose few threads must
/// not block.
///
/// The name is what `top -H`, `ps -L` and `perf` show (Linux keeps 15 bytes of it; longer names are cut).
/// Foundation's `Thread.name` does not reach the OS on Linux: threads started that way showed as the
/// pool's `oot.default-qos` in profiles.
package enum DedicatedThread {
    /// The thread could not be created (the process's or the system's thread limit, or memory).
    package struct StartFailure: Error, CustomStringConvertible {
        package let name: String
        /// `pthread_create`'s error number.
        package let code: Int32
        package var description: String { "cannot start thread \(name): \(String(cString: strerror(code)))" }
    }

    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(_ name: String, _ body: @escaping @Sendable () -> Void) {
            self.name = String(decoding: name.utf8.prefix(15), as: UTF8.self)
            self.body = body
        }
    }

    /// Threads this process started through `start` (a test's measure of work that should not make one).
    package static let started = Atomic<Int>(0)

    /// Starts a detached thread named `name` running `body`.
    /// - Throws: `StartFailure` when the thread cannot be created.
    package static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(StartFailure) {
        // Retained here, released by the thread when it takes ownership (or below when there is none).
        let start = Unmanaged.passRetained(Start(name, body)).toOpaque()
        var thread = pthread_t()
        let code = pthread_create(&thread, nil, { argument in
            let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
            DedicatedThread.nameThisThread(start.name)
            start.body()
            return nil
        }, start)
        guard code == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw StartFailure(name: name, code: code)
        }
        pthread_detach(thread)
        started.add(1, ordering: .relaxed)
    }

    /// Sets the calling thread's name (`comm`). Through /proc: Swift's Glibc module does not export
    /// `pthread_setname_np`, and `prctl` is variadic.
    private static func nameThisThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = name.withCString { write(fd, $0, strlen($0)) }
        close(fd)
    }

    /// Runs `body` on a thread of its own and returns its result without blocking the caller's thread.
    /// When no thread can be created, `body` runs on the caller's (blocking it: better than not at all).
    package static func run<T: Sendable>(name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            do {
                try start(name: name) { continuation.resume(returning: body()) }
            } catch {
                continuation.resume(returning: body())
            }
        }
    }
}
