import CNGHTTP2
import Glibc
import Synchronization

/// Starts detached POSIX threads for blocking work: the event loops, and connects (DNS has no non-blocking
/// form in glibc). Never the cooperative pool.
enum DetachedThread {
    private final class Box {
        let body: () -> Void
        let name: String
        init(_ name: String, _ body: @escaping () -> Void) { self.body = body; self.name = String(name.prefix(15)) }
    }

    /// - Throws: `APNsClientError` (`connectFailed`) when the thread cannot be created (resource exhaustion:
    ///   too many threads or no memory); the pool backs off and retries like any failed connect.
    static func start(name: String, _ body: @escaping () -> Void) throws(APNsClientError) {
        // Retained here, released by the thread when it takes ownership.
        let box = Unmanaged.passRetained(Box(name, body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { arg in
            let box = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
            _ = box.name.withCString { cnghttp2_set_thread_name($0) }
            box.body()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            throw APNsClientError(transport: .connectFailed, "cannot start thread \(name): \(String(cString: strerror(rc)))", underlyingCode: Int(rc))
        }
        pthread_detach(thread)
    }
}

/// How many of something are alive (an `Atomic` that closures can share).
final class LiveCount: Sendable {
    let value = Atomic<Int>(0)
    var current: Int { value.load(ordering: .acquiring) }
    func increment() { value.add(1, ordering: .relaxed) }
    func decrement() { value.subtract(1, ordering: .releasing) }
}
