import DequeModule
import Synchronization

/// Byte buffers kept for reuse: a buffer written for one record or request, then given back, is written again
/// for the next one instead of being allocated anew.
///
/// Buffers are taken oldest first. One given back while someone else still holds it (a resend's copy, say) is
/// therefore almost always unshared by the time it is taken again; if not, the taker's first write copies it
/// (arrays copy on write), so reuse is only ever an optimisation and never changes what anyone reads.
///
/// At most `kept` buffers wait here; more are dropped, and so is a buffer grown beyond `largestKept` bytes for
/// a rare large value (it is not held on to for the common small ones).
package final class ByteBufferPool: Sendable {
    private let free = Mutex(Deque<[UInt8]>())
    private let kept: Int
    private let largestKept: Int

    package init(kept: Int, largestKept: Int) {
        self.kept = kept
        self.largestKept = largestKept
    }

    /// Buffers waiting to be taken.
    package var count: Int { free.withLock { $0.count } }

    /// A buffer to write into: one given back earlier, or a new empty one. Its contents are the last holder's:
    /// empty it before writing.
    package func take() -> [UInt8] {
        free.withLock { $0.popFirst() } ?? []
    }

    /// Keeps `buffer` for a later `take`, unless the pool is full or the buffer is empty or too large.
    package func give(_ buffer: [UInt8]) {
        guard buffer.capacity > 0, buffer.capacity <= largestKept else { return }
        free.withLock { free in
            if free.count < kept { free.append(buffer) }
        }
    }

    /// Runs `body` with an emptied buffer from the pool and gives it back afterwards (also when `body` throws).
    package func withBuffer<R, Failure: Error>(_ body: (inout [UInt8]) throws(Failure) -> R) throws(Failure) -> R {
        var buffer = take()
        buffer.removeAll(keepingCapacity: true)
        defer { give(buffer) }
        return try body(&buffer)
    }
}
