#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a POSIX mutex, for locks that several threads take for every event.
///
/// A contended `pthread_mutex_lock` sleeps in the kernel at once. Swift's `Mutex` on Linux first spins (up to
/// a thousand pause instructions) and then sleeps on a priority-inheritance futex. That suits a lock whose
/// holder is running on another core; in the relay more threads want the hot locks than there are cores (the
/// APNs event loops, the Kafka poll threads, librdkafka's threads, the cooperative pool — on two cores), so a
/// spinning thread mostly waits for a holder that is not running. A profile at full speed put a third of the
/// relay's CPU in `Mutex._lockSlow`'s spin loop (Benchmarks/README.md). `Mutex` stays the choice for locks
/// taken rarely.
// @unchecked Sendable: `value` is read and written only inside `withLock`, between lock and unlock of `mutex`.
package final class BlockingMutex<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    package init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock. `body` must not take this lock again.
    @inlinable
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body(&value)
    }

    @inlinable
    func lock() {
        let rc = pthread_mutex_lock(mutex)
        precondition(rc == 0, "pthread_mutex_lock failed: \(rc)")
    }

    @inlinable
    func unlock() {
        let rc = pthread_mutex_unlock(mutex)
        precondition(rc == 0, "pthread_mutex_unlock failed: \(rc)")
    }
}
