import Synchronization

/// Serializes starting child processes with socket changes that a child must not catch half-way.
///
/// From fork to exec a child holds a copy of every socket of its parent, close-on-exec or not. librdkafka
/// 2.0.2's mock broker, when it goes down, closes its listener and at once binds the same port again — and
/// aborts the whole process if the port is still in use, which it is while any child is between its fork
/// and its exec (reproduced: a broker set down and up in a loop while processes start aborts within a few
/// hundred rounds). `MockKafkaCluster.setBrokerDown(_:)` holds this lock; code that starts processes in a
/// process whose mock brokers go down (the tests) starts them inside ``withLock(_:)``. Starting a process
/// returns after its exec (posix_spawn waits for it), so the lock is held for about a millisecond.
public enum ForkGuard {
    private static let lock = Mutex<Void>(())

    public static func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        try lock.withLock { _ throws(E) -> T in try body() }
    }
}
