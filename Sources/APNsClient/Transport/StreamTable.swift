import APNsCore
import DequeModule
import ServiceSupport

/// The requests of one HTTP/2 connection, as a value type: which wait for a stream, which are open on which
/// stream id, their deadlines, and what the connection's state (SETTINGS, GOAWAY, retirement, shutdown) means
/// for them. It does no I/O: the connection asks it what to do and carries that out with nghttp2, so every
/// rule here is tested without a socket (`StreamTableTests`), as `PoolStateMachine` is.
///
/// `Request` is opaque here: the connection uses its `StreamRequest`, tests plain values.
struct StreamTable<Request> {
    /// Where the connection is in its life, as far as new streams are concerned.
    enum Phase: Equatable {
        /// Waiting for the server's first SETTINGS: nothing may be sent (APNs announces its stream limit there).
        case awaitingSettings
        /// Streams open as the peer's MAX_CONCURRENT_STREAMS allows.
        case open
        /// The server sent GOAWAY: streams above `lastStreamID` were not processed; no new stream opens.
        case goaway(lastStreamID: Int32)
        /// No new stream opens (its stream ids are used up, or the owner drains it); open ones finish.
        case retiring
    }

    /// Why a request ended without a response, as the connection reports it.
    struct Failure: Equatable {
        var transport: TransportFailure
        var message: String
    }

    /// A request and when it must have its answer, waiting for a stream or open on one: the same value in
    /// both places, so a request that opens a stream moves from one to the other whole (unpacking it into
    /// another type copied the request: a retain and a release).
    struct Entry {
        var request: Request
        var deadline: MonotonicInstant
    }
    typealias Waiting = Entry
    typealias Open = Entry

    /// What ends at a deadline scan.
    struct Expired {
        /// Requests that never got a stream, and why (`notSent` at their deadline, or cancelled).
        var waiting: [(request: Request, failure: Failure?)] = []
        /// Streams to reset (RST_STREAM CANCEL), with why (`timedOut`, or cancelled: `nil`).
        var streams: [(streamID: Int32, request: Request, failure: Failure?)] = []
        var isEmpty: Bool { waiting.isEmpty && streams.isEmpty }
    }

    private(set) var phase = Phase.awaitingSettings
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (1 until its SETTINGS say otherwise: APNs' limit before the
    /// first valid token).
    private(set) var maxConcurrentStreams = 1
    private(set) var waiting = Deque<Waiting>()
    /// Submitted streams. Their requests' header fields are lent to nghttp2 until it packs the HEADERS
    /// (`PreparedRequest.withHeaders`), so a request leaves only when nghttp2 is done with them: it closed the
    /// stream or did not send its HEADERS (`closed`), the connection reset the stream first (`expire`: a
    /// reset cancels a HEADERS not yet packed), or the session has ended (`closeAll`). Keep it so for any new
    /// way out.
    private(set) var open = OpenStreams<Open>()
    /// No deadline in the table is before this (it may be earlier than the earliest: a scan then recomputes it).
    /// Requests mostly end long before their deadline, so it is kept loosely instead of in a heap.
    private(set) var nextDeadline: MonotonicInstant?

    var isEmpty: Bool { waiting.isEmpty && open.isEmpty }
    var openCount: Int { open.count }
    var waitingCount: Int { waiting.count }

    // MARK: - The connection's state

    /// The server's SETTINGS arrived (the first, or a change). - Returns: whether this was the first.
    mutating func settingsReceived(maxConcurrentStreams: Int) -> Bool {
        self.maxConcurrentStreams = max(0, maxConcurrentStreams)
        guard phase == .awaitingSettings else { return false }
        phase = .open
        return true
    }

    /// GOAWAY received: requests still waiting fail as never processed (the pool resends them elsewhere);
    /// open streams above `lastStreamID` will close as not processed (`closed(streamID:)` says so).
    mutating func goawayReceived(lastStreamID: Int32) -> [(request: Request, failure: Failure)] {
        phase = .goaway(lastStreamID: lastStreamID)
        return failWaiting(Failure(transport: .notProcessed, message: "connection received GOAWAY"))
    }

    /// No new streams from now on (stream ids used up, or drained by the owner). Requests still waiting fail
    /// as never processed with `message`. A GOAWAY already received stays the phase.
    mutating func retire(_ message: String) -> [(request: Request, failure: Failure)] {
        if case .goaway = phase {} else { phase = .retiring }
        return failWaiting(Failure(transport: .notProcessed, message: message))
    }

    // MARK: - Requests

    /// A request waits for a stream; only while `refusal` is `nil` (a connection checks once for a turn's
    /// arrivals, then moves each in, or fails each with the refusal).
    mutating func wait(_ request: consuming Request, deadline: MonotonicInstant) {
        waiting.append(Waiting(request: request, deadline: deadline))
        if nextDeadline.map({ deadline < $0 }) ?? true { nextDeadline = deadline }
    }

    /// Why a request arriving now would fail at once (the connection opens no more streams); `nil` if it would
    /// wait for a stream.
    var refusal: Failure? {
        switch phase {
        case .awaitingSettings, .open: nil
        case .goaway: Failure(transport: .notProcessed, message: "connection received GOAWAY")
        case .retiring: Failure(transport: .notProcessed, message: "connection is closing")
        }
    }

    /// How many waiting requests may open a stream now.
    var startable: Int {
        guard phase == .open else { return 0 }
        return max(0, min(waiting.count, maxConcurrentStreams - open.count))
    }

    /// Takes the next waiting request to open a stream for (`startable > 0`); then `opened` or `notOpened`.
    mutating func nextToStart() -> Waiting? {
        guard startable > 0 else { return nil }
        return waiting.popFirst()
    }

    /// The request taken by `nextToStart` is on stream `streamID`.
    mutating func opened(_ started: consuming Waiting, streamID: Int32) {
        open.insert(started, id: streamID)
    }

    /// A stream closed; returns its request and whether GOAWAY says the server never processed it.
    mutating func closed(streamID: Int32) -> (request: Request, notProcessed: Bool)? {
        guard let entry = open.remove(id: streamID) else { return nil }
        if case .goaway(let last) = phase, streamID > last { return (entry.request, true) }
        return (entry.request, false)
    }

    /// The request on `streamID`, if it is open.
    func request(onStream streamID: Int32) -> Request? { open[streamID]?.request }

    /// Ends what is cancelled (`isCancelled`) or past its deadline at `now`, and recomputes `nextDeadline`.
    mutating func expire(now: MonotonicInstant, isCancelled: (Request) -> Bool) -> Expired {
        var expired = Expired()
        var next: MonotonicInstant?
        if !waiting.isEmpty {
            var kept = Deque<Waiting>()
            kept.reserveCapacity(waiting.count)
            for w in waiting {
                if isCancelled(w.request) {
                    expired.waiting.append((w.request, nil))
                } else if w.deadline <= now {
                    expired.waiting.append((w.request, Failure(transport: .notSent, message: "deadline passed while queued for a stream")))
                } else {
                    kept.append(w)
                    if next.map({ w.deadline < $0 }) ?? true { next = w.deadline }
                }
            }
            waiting = kept
        }
        open.forEach { id, entry in
            if isCancelled(entry.request) {
                expired.streams.append((id, entry.request, nil))
            } else if entry.deadline <= now {
                expired.streams.append((id, entry.request, Failure(transport: .timedOut, message: "no response before the deadline")))
            } else if next.map({ entry.deadline < $0 }) ?? true {
                next = entry.deadline
            }
        }
        // In ascending order of id, the order the streams opened: they are reset in that order.
        for e in expired.streams { _ = open.remove(id: e.streamID) }
        nextDeadline = next
        return expired
    }

    /// The connection ends: every request still here, with why. Waiting requests were never sent
    /// (`notProcessed`); open ones above a GOAWAY's last stream id were not processed either, the others
    /// end with `failure` (APNs may have them).
    mutating func closeAll(failure: Failure) -> [(request: Request, failure: Failure)] {
        var ended = failWaiting(Failure(transport: .notProcessed, message: "connection closed before the request was sent"))
        let last: Int32? = if case .goaway(let last) = phase { last } else { nil }
        for (id, entry) in open.removeAll() {
            if let last, id > last {
                ended.append((entry.request, Failure(transport: .notProcessed, message: "stream above GOAWAY last-stream-id \(last)")))
            } else {
                ended.append((entry.request, failure))
            }
        }
        nextDeadline = nil
        return ended
    }

    private mutating func failWaiting(_ failure: Failure) -> [(request: Request, failure: Failure)] {
        defer { waiting.removeAll() }
        return waiting.map { ($0.request, failure) }
    }
}
