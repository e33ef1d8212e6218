/// The admin endpoint's open connections, in arrival order, and which one to close to make room for a new one.
///
/// The cap is kept by making room, never by turning the newcomer away. The endpoint exists for the kubelet: if a
/// full endpoint refused new connections (closed them at once, or answered 503), whoever holds the cap with idle
/// connections would fail every probe, and Kubernetes would restart a healthy relay. A probe sends its request as
/// soon as it connects and is answered on the read that brings it, so it is among the newest connections for the
/// few turns of the event loop it lives; closing the *oldest* connection that is still waiting for its request
/// takes an idle one (an attacker's) and leaves the probe alone. To evict a probe, a flood would have to get a
/// full cap's worth of connections accepted between the probe's accept and its read, while the loop accepts only
/// a few per turn.
///
/// Connections that were answered go first (served; one still open is lingering or reading slowly), then those
/// waiting for a request, oldest first. The newcomer is always admitted.
///
/// A value type: the owner keeps it behind a lock and closes the returned connection outside it.
struct AdminConnectionGate<Connection> {
    enum Phase: Equatable {
        /// Connected; its request line and headers are not complete yet.
        case awaitingRequest
        /// Its answer (or refusal) has been written; it closes when that is out or the peer leaves.
        case answered
    }

    private struct Entry {
        let id: Int
        let connection: Connection
        var phase: Phase
    }

    struct Admission {
        /// The newcomer's id, for ``answered(_:)`` and ``closed(_:)``.
        var id: Int
        /// The connection to close to make room (it no longer counts as open), if the gate was full.
        var evicted: Connection?
        /// What the evicted connection was doing: one evicted while ``Phase/answered`` had been served.
        var evictedPhase: Phase?
    }

    let capacity: Int
    /// Arrival order. A few dozen entries: linear scans are cheaper than any index.
    private var entries: [Entry] = []
    private var nextID = 0

    init(capacity: Int) {
        precondition(capacity >= 1, "an admin endpoint that holds no connection serves nothing")
        self.capacity = capacity
    }

    var openCount: Int { entries.count }

    func phase(of id: Int) -> Phase? { entries.first { $0.id == id }?.phase }

    /// A new connection arrived; it counts as open from now on.
    mutating func opened(_ connection: Connection) -> Admission {
        var evicted: Entry?
        if entries.count >= capacity {
            let victim =
                entries.firstIndex { $0.phase == .answered }
                ?? entries.firstIndex { $0.phase == .awaitingRequest }
                ?? entries.startIndex
            evicted = entries.remove(at: victim)
        }
        nextID += 1
        entries.append(Entry(id: nextID, connection: connection, phase: .awaitingRequest))
        return Admission(id: nextID, evicted: evicted?.connection, evictedPhase: evicted?.phase)
    }

    /// The connection's answer is out.
    /// - Returns: `false` if it is no longer open here (evicted): the caller's connection is closing anyway.
    @discardableResult
    mutating func answered(_ id: Int) -> Bool {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return false }
        entries[index].phase = .answered
        return true
    }

    /// The connection closed (by either side).
    /// - Returns: `false` if it was not open here (evicted before, or closed twice).
    @discardableResult
    mutating func closed(_ id: Int) -> Bool {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return false }
        entries.remove(at: index)
        return true
    }
}
