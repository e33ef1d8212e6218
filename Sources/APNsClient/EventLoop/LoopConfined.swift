import Synchronization

/// A thread's `pthread_self()`, shareable with the thread's closure.
final class ThreadIdentity: Sendable {
    let value = Atomic<UInt>(0)
}

/// A value only one thread touches at a time, moved between threads once: a loop's state (created before its
/// thread starts and handed to it), or a connected `TLSSocket` (from its connector thread to its loop).
// @unchecked Sendable: after the hand-over only the receiving thread reads or writes `value`; the sender
// never touches it again (a loop's state is reached only through `APNsEventLoop.execute`).
final class LoopConfined<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
