import APNsCore
import ServiceSupport
import Synchronization

/// One attempt of a request, from its arrival at the pool to its answer: what nghttp2 sends, what comes back,
/// and what the pool needs when it ends (which connection, when it was sent, whether it may be resent, whom to
/// tell). It waits for a connection as itself (one reference in the pool's queue), and ends once, through its
/// pool (`ConnectionPool.completed`), in a batch with the other answers of its event loop's turn — no closure
/// per request on the way. A resend is a new attempt, with a copy of the send.
///
/// Invariant for `@unchecked Sendable`: the pool creates it (on the sender's thread, or on an event loop for a
/// resend) before anyone else can see it, and keeps it under its lock while it waits; the
/// thread that hands it a connection sets `connection`, `deadline` and `enqueuedAt` (`assign`) before handing
/// it over through the connection's locked inbox; from then on only the connection's event loop reads or
/// writes it (`cancelled` excepted), until it ends, after which nobody touches its response fields.
final class StreamRequest: @unchecked Sendable {
    /// When the stream must have its answer (`timedOut` after); set by `assign`.
    private(set) var deadline: MonotonicInstant
    /// When a connection took it; set by `assign`.
    private(set) var enqueuedAt: MonotonicInstant
    /// When its last byte went to the connection's output (nghttp2 packed the DATA frame that ends the
    /// stream), to the loop turn (never before `enqueuedAt`); `enqueuedAt` until then. What comes after is
    /// the path and APNs; what came before, waiting for a stream or for send window, is this connection's
    /// own queue.
    var sentAt: MonotonicInstant
    /// Set by the caller's cancellation (any thread); the event loop acts on it.
    let cancelled = Atomic<Bool>(false)
    let pool: ConnectionPool
    /// The connection it was given (`assign`); `nil` while it waits for one.
    private(set) var connection: APNsConnection!
    /// The send as a whole (every attempt): how long it may wait, resends so far, cancellation, the caller;
    /// `send.request` is what goes on the stream (read it in place: a copy retains each of its buffers).
    let send: ConnectionPool.Send
    private var ended = false
    var streamID: Int32 = 0
    var payloadOffset = 0
    /// The answer's headers so far.
    var head = ResponseHead()
    /// At most `prepared.maxResponseBody` bytes.
    var body: [UInt8] = []

    init(_ send: consuming ConnectionPool.Send, pool: ConnectionPool) {
        self.deadline = send.deadline
        self.enqueuedAt = send.startedAt
        self.sentAt = send.startedAt
        self.send = send
        self.pool = pool
    }

    /// A connection takes the request: its stream has until `deadline` for the answer.
    func assign(to connection: APNsConnection, deadline: MonotonicInstant, now: MonotonicInstant) {
        self.connection = connection
        self.deadline = deadline
        self.enqueuedAt = now
        self.sentAt = now
    }

    /// The request's header buffer goes back to the pool with its last holder (a resend's own stream request
    /// holds it too; then it is shared when taken, and not written to: `ByteBufferPool`).
    deinit {
        // The stored buffer itself (a computed property here copied the whole send, a retain per reference).
        pool.requestBuffers.give(send.request.bytes)
    }

    /// Marks the request ended. - Returns: `false` if it had ended already (the caller drops this ending).
    func end() -> Bool {
        guard !ended else { return false }
        ended = true
        return true
    }

    static let cancelledError = APNsClientError(.cancelled, "cancelled by the caller")

    /// Ends the request alone (not in a loop's batch): it was refused or cancelled before it reached a loop.
    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        guard end() else { return }
        pool.completed(CollectionOfOne((self, result)))
    }

    func completeCancelled() { complete(.failure(Self.cancelledError)) }

    func fail(_ failure: TransportFailure, _ message: String) {
        complete(.failure(APNsClientError(transport: failure, message)))
    }
}
