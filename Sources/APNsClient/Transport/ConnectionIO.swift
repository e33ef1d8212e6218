import APNsCore
import CNGHTTP2
import DequeModule
import Glibc
import Logging
import ServiceSupport

/// One APNs connection on its event loop: the owners of its C handles (`TLSSocket`: fd and `SSL*`;
/// `HTTP2Session`: the `nghttp2_session*`) and its `StreamTable` (what waits, what is open, deadlines,
/// GOAWAY), glued together. Everything here runs on the loop's thread: the loop calls `readable`,
/// `writable`, `timerFired` and, once per turn in which anything happened, `process`; nghttp2's callbacks
/// (inside `readable` and `process`) record state and end requests. Requests end through the loop
/// (`EventLoopCore.complete`), with the rest of the turn's answers.
///
/// Talks to senders only through `connection` (the pool's handle: a locked inbox and the published load).
final class ConnectionIO {
    let connection: APNsConnection
    /// Its key in the event loop (unique in the process, unlike the pool's `connection.id`).
    var loopToken: Int { connection.loopToken }
    var fd: Int32 { socket.fd }
    /// Its loop's state. The core outlives every connection on it: a connection holds its `connection`, which
    /// holds its loop (`APNsConnection.loop`), which holds the core (`APNsEventLoop.core`); both `let`s. So the
    /// reference is neither counted nor checked (`unowned` paid two atomic operations on the core at every
    /// use, several per request).
    unowned(unsafe) let core: EventLoopCore
    private let socket: TLSSocket
    /// Set by `start` (its callbacks need this object), released when the connection closes.
    var session: HTTP2Session!
    var table = StreamTable<StreamRequest>()
    private let token: TokenSource?
    private var credentials = TokenState()
    var keepalive: Keepalive
    private var stats = Stats()
    private let connectDeadline: MonotonicInstant
    /// Told once: the first SETTINGS arrived (`.success`), or the connection ended before them.
    var onReady: ((Result<Void, APNsClientError>) -> Void)?
    let onEvent: @Sendable (ConnectionEvent) -> Void
    private let live: LiveCount
    var logger: Logger { connection.logger }

    /// Marked for this loop turn's `process` (`EventLoopCore.markDirty`).
    var isDirty = false
    private var closed = false
    private var fatal: (failure: TransportFailure, message: String)?
    /// GOAWAY sent (drained): no new streams, the session ends when its streams have.
    private var terminated = false
    private var writeInterest = false
    /// The earliest time a loop timer is set to wake this connection.
    private var wakeScheduledAt: MonotonicInstant?
    private var incoming = Deque<StreamRequest>()
    /// The stream whose headers and data are arriving (they come together): saves a lookup per header.
    /// Unretained: the table holds the request while its stream is open, and every path that takes a stream
    /// out of the table (`streamClosed`, `requestNotSent`, `expire`, `close`) clears this before the request
    /// can go (while that path still holds it).
    var current: (streamID: Int32, request: Unmanaged<StreamRequest>)?

    struct TokenState {
        var current: ProviderToken?
        /// When the connection took `current` (Unix nanoseconds): just before its first request with it.
        var adoptedAtNanoseconds: Int64 = 0
        var lastCheck: Int64 = .min
        var authorization: [UInt8]?
    }

    struct Keepalive {
        var lastReceive: MonotonicInstant
        var pingSentAt: MonotonicInstant?
    }

    /// What the pool has not heard yet (published once per turn).
    struct Stats {
        var completed = 0
        var timeouts = 0
        var latencyEWMA: Double = 0
    }

    init(
        connection: APNsConnection, core: EventLoopCore, socket: TLSSocket, token: TokenSource?,
        connectDeadline: MonotonicInstant, live: LiveCount,
        onEvent: @escaping @Sendable (ConnectionEvent) -> Void, onReady: @escaping (Result<Void, APNsClientError>) -> Void
    ) {
        self.connection = connection
        self.core = core
        self.socket = socket
        self.token = token
        self.connectDeadline = connectDeadline
        self.live = live
        self.onEvent = onEvent
        self.onReady = onReady
        self.keepalive = Keepalive(lastReceive: core.now)
    }

    /// Starts HTTP/2 on the established TLS session (preface and SETTINGS) and joins the loop's epoll set;
    /// the connection is ready once the server's SETTINGS arrive (before `connectDeadline`).
    func start() {
        do {
            session = try HTTP2Session(connection: self)
        } catch {
            fatal = (.connectFailed, error.message)
        }
        if fatal == nil && !core.register(self) {
            fatal = (.connectFailed, "cannot add the socket to the event loop: errno \(errno)")
        }
        process(now: core.now)
    }

    // MARK: - Called by the loop

    func readable() {
        guard !closed, fatal == nil else { return }
        // Every record that has arrived (answers come one record each from a server that does not coalesce;
        // read-ahead brings many in with one read(2)), up to a bound so that one busy connection does not hold
        // up its neighbours.
        for _ in 0..<64 {
            switch socket.read(into: core.readBuffer) {
            case .data(let count):
                keepalive.lastReceive = core.now
                if let error = session.receive(UnsafeRawBufferPointer(rebasing: core.readBuffer[..<count])) {
                    fatal = (.connectionLost, error)
                    return
                }
                if !socket.hasBufferedInput { return }  // the socket wakes the loop again when more arrives
            case .wouldBlock:
                return
            case .closed(let why):
                fatal = (.connectionLost, why)
                return
            }
        }
        core.readAgainNextTurn(self)  // more may be waiting: next turn, without waiting.
    }

    func writable() {
        guard !closed, fatal == nil else { return }
        writeOutput()
    }

    func timerFired() { wakeScheduledAt = nil }

    /// Everything the connection does in a turn: takes new requests, expires deadlines, opens streams,
    /// pings, drains, writes, publishes its load for the pool, and sets its next timer; closes when done.
    func process(now: MonotonicInstant) {
        guard !closed else { return }
        if table.phase == .awaitingSettings && now >= connectDeadline && fatal == nil {
            fatal = (.connectFailed, "no SETTINGS from the server before the connect timeout")
        }
        if fatal == nil {
            let (drain, cancellations) = connection.takeInbox(into: &incoming)
            // Moved into the table one by one, in order (iterating would retain and release each request once
            // more). Whether the table takes them is one question for all: nothing here changes its phase.
            if let refused = table.refusal {
                while let request = incoming.popFirst() { finish(request, refused) }
            } else {
                while let request = incoming.popFirst() {
                    let deadline = request.deadline
                    table.wait(request, deadline: deadline)
                }
            }
            if cancellations || table.nextDeadline.map({ now >= $0 }) == true { expire(now: now) }
            startStreams()
            checkKeepalive(now: now)
            if drain && table.isEmpty && !terminated && fatal == nil {
                session.terminate()
                terminated = true
            }
            if fatal == nil { writeOutput() }
        }
        if fatal != nil || (!session.isActive && socket.unwritten == 0) {
            close()
            return
        }
        publishLoad()
        scheduleWake()
    }

    /// The loop stops: the connection ends at once.
    func abort(_ why: String) {
        if fatal == nil { fatal = (.connectionLost, why) }
        close()
    }

    // MARK: - Requests

    private func startStreams() {
        // The property is read once per turn (reading it copies the table: a retain of each of its buffers);
        // the loop asks the table itself (`nextToStart`, mutating: no copy) whether another may start.
        guard table.startable > 0 else { return }
        if token != nil { refreshToken() }
        while true {
            if session.nextStreamID > UInt32(connection.configuration.settings.maxStreamID) {
                retireForStreamIDs()
                return
            }
            guard let next = table.nextToStart() else { return }
            if next.request.pool.holdsUnsent.load(ordering: .relaxed) {
                finish(next.request, .init(transport: .notSent, message: "not sent: the client holds requests it has not sent yet"))
                continue
            }
            let streamID = session.submit(next.request, authorization: credentials.authorization)
            guard streamID > 0 else {
                finish(next.request, .init(transport: .notProcessed, message: "nghttp2_submit_request: \(HTTP2Session.describe(streamID))"), code: Int(streamID))
                if streamID == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue {
                    retireForStreamIDs()
                    return
                }
                continue
            }
            next.request.streamID = streamID
            table.opened(next, streamID: streamID)
        }
    }

    func finish(_ request: StreamRequest, _ failure: StreamTable<StreamRequest>.Failure, code: Int = 0) {
        finish(request, .failure(APNsClientError(transport: failure.transport, failure.message, underlyingCode: code)))
    }

    func finish(_ request: StreamRequest, _ result: Result<APNsResponse, APNsClientError>) {
        if case .success = result {
            let seconds = (core.now - request.enqueuedAt).seconds
            stats.latencyEWMA = stats.latencyEWMA == 0 ? seconds : stats.latencyEWMA * 0.9 + seconds * 0.1
            core.observeAnswer(seconds: seconds)
        }
        stats.completed += 1
        core.complete(request, result)
    }

    private func expire(now: MonotonicInstant) {
        let expired = table.expire(now: now) { $0.cancelled.load(ordering: .acquiring) }
        for (request, failure) in expired.waiting {
            if let failure {
                stats.timeouts += 1
                finish(request, failure)
            } else {
                stats.completed += 1
                core.complete(request, .failure(StreamRequest.cancelledError))
            }
        }
        var timedOut = false
        for (streamID, request, failure) in expired.streams {
            session.resetStream(streamID)
            if current?.streamID == streamID { current = nil }
            if let failure {
                timedOut = true
                stats.timeouts += 1
                finish(request, failure)
            } else {
                stats.completed += 1
                core.complete(request, .failure(StreamRequest.cancelledError))
            }
        }
        // A timeout is a reason to suspect the connection: check it is alive.
        if timedOut && keepalive.pingSentAt == nil { sendPing(now: now) }
    }

    // MARK: - Timers: token, keepalive, stream ids

    private func refreshToken() {
        guard let token else { return }
        let nowNanoseconds = token.clock.nowNanoseconds()
        let now = nowNanoseconds / 1_000_000_000
        guard now != credentials.lastCheck else { return }
        credentials.lastCheck = now
        do {
            let candidate = try token.signer.token(now: now)
            if let current = credentials.current {
                guard token.policy.shouldSwitch(
                    current: current, adoptedAtNanoseconds: credentials.adoptedAtNanoseconds, candidate: candidate, nowNanoseconds: nowNanoseconds
                ) else { return }
                onEvent(.tokenRotated)
            }
            credentials.current = candidate
            credentials.adoptedAtNanoseconds = nowNanoseconds
            credentials.authorization = Array(candidate.authorization.utf8)
        } catch {
            logger.error("cannot sign the provider token: \(error)")
        }
    }

    private func checkKeepalive(now: MonotonicInstant) {
        let configuration = connection.configuration
        if let sent = keepalive.pingSentAt {
            if now - sent >= configuration.settings.pingTimeout {
                fatal = (.connectionLost, "PING not answered within \(configuration.settings.pingTimeout)")
            }
        } else if table.phase != .awaitingSettings && now - keepalive.lastReceive >= configuration.settings.pingInterval {
            sendPing(now: now)
        }
    }

    private func sendPing(now: MonotonicInstant) {
        if session.ping() { keepalive.pingSentAt = now }
    }

    /// No new stream can be opened (or soon none could): stop taking requests, hand the waiting ones back as
    /// never processed (the pool resends them on another connection), finish the open streams, close.
    private func retireForStreamIDs() {
        guard table.phase == .open || table.phase == .awaitingSettings else { return }
        logger.notice("connection retiring: its HTTP/2 stream ids are (nearly) used up", metadata: [
            "next-stream-id": "\(session.nextStreamID)",
        ])
        connection.retire()
        for (request, failure) in table.retire("connection used up its stream ids") { finish(request, failure) }
        core.markDirty(self)  // its drain is seen next round: with nothing open it closes at once
    }

    /// Wakes the connection at its earliest deadline: a request's, the connect timeout, or the PING's.
    private func scheduleWake() {
        let configuration = connection.configuration
        // Before the server's SETTINGS only the connect timeout counts (no PING is sent then).
        var next = table.phase == .awaitingSettings
            ? connectDeadline
            : keepalive.pingSentAt.map { $0 + configuration.settings.pingTimeout } ?? keepalive.lastReceive + configuration.settings.pingInterval
        if let deadline = table.nextDeadline, deadline < next { next = deadline }
        if let scheduled = wakeScheduledAt, scheduled <= next { return }
        wakeScheduledAt = next
        core.schedule(at: next, connection: loopToken)
    }

    // MARK: - Output and teardown

    /// Moves nghttp2's frames into the socket and writes them, once per batch of frames (bounded by
    /// `maxOutputBufferBytes`); asks the loop for writability while the socket is full.
    private func writeOutput() {
        for round in 0..<16 {
            if let error = session.send(into: socket, limit: connection.configuration.settings.maxOutputBufferBytes) {
                fatal = (.connectionLost, error)
                return
            }
            switch socket.flush() {
            case .done:
                if writeInterest {
                    writeInterest = false
                    core.setWriteInterest(self, false)
                }
                if !session.wantsWrite { return }
                if round == 15 { core.markDirty(self) }  // more in nghttp2: the rest next round, without waiting
            case .wouldBlock:
                if !writeInterest {
                    writeInterest = true
                    core.setWriteInterest(self, true)
                }
                return
            case .failed(let why):
                fatal = (.connectionLost, why)
                return
            }
        }
    }

    private func publishLoad() {
        let window = session.sendWindow
        if window < ConnectionPool.Machine.windowStarvedBytes { core.noteWindowStarved() }
        let maxStreams = table.maxConcurrentStreams
        connection.publish(stats, sendWindow: window, maxConcurrentStreams: maxStreams)
        stats.completed = 0
        stats.timeouts = 0
    }

    /// Ends every request still here, frees the sessions and the socket, then tells the owner.
    private func close() {
        guard !closed else { return }
        closed = true
        let wasReady = table.phase != .awaitingSettings
        let (failure, message) = fatal ?? (.connectionLost, "connection closed")
        for request in connection.closed() {
            request.fail(.notProcessed, "connection closed before the request was sent")
        }
        let ending = StreamTable<StreamRequest>.Failure(transport: failure == .connectFailed ? .connectionLost : failure, message: message)
        current = nil
        for (request, why) in table.closeAll(failure: ending) { finish(request, why) }
        core.deregister(self)
        session = nil
        // close_notify on an orderly close of an established session only: after a failure the peer has
        // usually gone, and the write would only meet a reset socket.
        socket.close(clean: fatal == nil && wasReady)
        live.decrement()
        if fatal != nil { logger.notice("connection closed: \(message)") }
        // Only connections that became ready were handed to the owner; one that never did reports through
        // `onReady` (a `.closed` as well would make the pool reconnect twice, without backoff).
        if let onReady {
            self.onReady = nil
            core.afterCompletions { onReady(.failure(APNsClientError(transport: .connectFailed, message))) }
        } else {
            let onEvent = self.onEvent
            core.afterCompletions { onEvent(.closed) }
        }
    }
}
