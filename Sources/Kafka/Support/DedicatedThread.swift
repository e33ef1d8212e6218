import Foundation

/// Runs blocking C calls on their own OS thread, never on Swift's cooperative pool.
enum DedicatedThread {
    /// Starts a detached, named thread running `body`. Linux keeps at most 15 bytes of a thread's name and
    /// refuses longer ones (the thread would show under the process's name in `top -H` and `perf`).
    static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        assert(name.utf8.count <= 15, "thread name '\(name)' is longer than Linux's 15 bytes")
        let thread = Thread(block: body)
        thread.name = name
        thread.start()
    }

    /// Runs `body` on a new thread and returns its result without blocking the caller's thread.
    static func run<T: Sendable>(name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            start(name: name) { continuation.resume(returning: body()) }
        }
    }
}
