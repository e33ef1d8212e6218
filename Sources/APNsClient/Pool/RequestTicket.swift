import ServiceSupport
import Synchronization

/// Cancels a request wherever it is: waiting for a connection or a free stream, or on its stream (which is
/// then reset with RST_STREAM CANCEL). The request completes with `APNsClientError.Code.cancelled`.
///
/// Each stage the request enters registers how to cancel it there; cancelling runs the current one.
final class RequestTicket: Sendable {
    private struct State {
        var cancelled = false
        var action: (@Sendable () -> Void)?
    }
    private let state = BlockingMutex(State())

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Registers how to cancel the request at its current stage (replacing the previous stage's action).
    /// - Returns: `false` when the ticket is already cancelled: the caller completes the request as cancelled.
    func enter(cancellingWith action: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard !state.cancelled else { return false }
            state.action = action
            return true
        }
    }

    /// The request has ended: its cancel action goes. (The action holds the request's stream, which holds the
    /// ticket: kept, that cycle leaked every request sent with a ticket.)
    func finished() {
        state.withLock { $0.action = nil }
    }

    func cancel() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.cancelled else { return nil }
            state.cancelled = true
            defer { state.action = nil }
            return state.action
        }
        action?()
    }
}
