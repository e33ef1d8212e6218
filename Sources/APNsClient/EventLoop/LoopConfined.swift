import Glibc
import Synchronization

/// A thread's `pthread_self()`, shareable with the thread's closure.
final class ThreadIdentity: Sendable {
    let value = Atomic<UInt>(0)
}

/// A value only one thread touches at a time, moved between threads once: a loop's state (created before its
/// thread starts and handed to it), or a connected `TLSSocket` (from its connector thread to its loop).
///
/// The receiving thread `claim()`s it; from then on every access is checked to come from that thread, in
/// release builds too (as NIO's `NIOLoopBound` checks its event loop): a hand-over that is not one stops the
/// process at once instead of racing on the value. The check is a thread-local read and a load.
// @unchecked Sendable: after the hand-over only the receiving thread reads or writes `value`; the sender
// never touches it again (a loop's state is reached only through `APNsEventLoop.execute`).
final class LoopConfined<Value>: @unchecked Sendable {
    private var confined: Value
    /// The claiming thread's `pthread_self()`; 0 before the hand-over (the creating thread may set it up).
    private let owner = Atomic<UInt>(0)

    init(_ value: Value) { confined = value }

    /// The value; only from the thread that claimed it (any thread before).
    var value: Value {
        _read {
            checkConfined()
            yield confined
        }
        _modify {
            checkConfined()
            yield &confined
        }
    }

    /// Takes the value over for the calling thread: the hand-over.
    func claim() {
        owner.store(UInt(pthread_self()), ordering: .releasing)
    }

    @inline(__always)
    private func checkConfined() {
        let owner = owner.load(ordering: .acquiring)
        precondition(owner == 0 || owner == UInt(pthread_self()), "a loop-confined value was touched off the thread it was handed to")
    }
}
