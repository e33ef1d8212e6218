import Foundation

/// Runs blocking C calls on their own OS thread, never on Swift's cooperative pool.
enum DedicatedThread {
    /// Starts a detached, named thread running `body`.
    static func start(name: String, _ body: @escaping @Sendable () -> Void) {
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
