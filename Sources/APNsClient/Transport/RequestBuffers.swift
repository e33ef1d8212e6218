import DequeModule
import Synchronization

/// The header buffers of finished pushes, for the next ones (`PreparedRequest`): a push's headers cost no
/// allocation once the pool has warmed up.
///
/// A buffer goes back when its request finishes, possibly while the request's last holder has not let go of
/// it yet; it is taken out oldest first, so it is almost always unshared by then. A buffer still shared is
/// never written to: emptying it makes a new one (copy on write), so reuse is only ever an optimisation.
final class RequestBuffers: Sendable {
    private let free = Mutex(Deque<[UInt8]>())
    /// Buffers kept (about one per request in flight on a busy pool; more are simply dropped), and the largest
    /// capacity kept.
    private let kept: Int
    private static let largestKept = 4096

    init(kept: Int) {
        self.kept = kept
    }

    /// Buffers waiting to be taken.
    var count: Int { free.withLock { $0.count } }

    /// A buffer to write a request into (empty when none is free).
    func take() -> [UInt8] {
        free.withLock { $0.popFirst() } ?? []
    }

    /// Keeps `buffer` for a later request.
    func give(_ buffer: [UInt8]) {
        guard buffer.capacity > 0, buffer.capacity <= Self.largestKept else { return }
        free.withLock { free in
            if free.count < kept { free.append(buffer) }
        }
    }
}
