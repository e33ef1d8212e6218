import APNsCore
import CNGHTTP2
import Glibc
import Logging
import ServiceSupport

/// The part of an `APNsEventLoop` its thread owns: the epoll set's connections, the timers, the turn's
/// completions and the read buffer every connection on the loop shares (reads are one at a time).
///
/// **The batch window.** When APNs is slower than the relay (production's normal case) answers arrive one
/// at a time, and a loop that turned for each would pay a wake-up, a read, a write and a hand-off per push
/// (measured: 1.4 context switches and 110 µs of CPU per event against a server answering 1.5k/s, 3.6× the
/// cost of the same event at full speed). So after a turn that did work, the loop waits out the rest of
/// the window before it looks again: whatever arrived meanwhile — answers, new requests — is read,
/// ended and written in one turn. A loop that was idle answers its first event at once; the price is at
/// most one window of latency per hop while busy.
///
/// How long that window is: `BatchWindow`.
final class EventLoopCore {
    private enum Timer {
        case connection(Int)
        case work(@Sendable () -> Void)
    }

    /// Set right after init; released when the thread ends (a running loop is never deallocated).
    var loop: APNsEventLoop!
    let logger: Logger
    private let epollFD: Int32
    private let eventFD: Int32
    private let timerFD: Int32
    /// This turn's time (taken once per turn after the wait): good enough for deadlines and latencies.
    private(set) var now = MonotonicInstant.now
    var stopping = false

    private var connections: [Int: ConnectionIO] = [:]
    private var timers = TimerQueue<Timer>()
    private var armedFor: MonotonicInstant?
    /// Connections with something to do this turn (each once: `ConnectionIO.isDirty`).
    private var dirty: [ConnectionIO] = []
    /// Connections whose TLS session may hold more decrypted data than their last read took.
    private var readAgain: [ConnectionIO] = []
    private var completed: [(StreamRequest, Result<APNsResponse, APNsClientError>)] = []
    private var afterCompletions: [() -> Void] = []
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    private var batchWindow: BatchWindow
    /// When the last turn that did work began.
    private var lastBusyTurn: MonotonicInstant?
    /// A connection ended this turn with its send window nearly used up: the next turn waits no longer than
    /// the floor, so the server's WINDOW_UPDATE is read at once (a wider window would hold the connection
    /// starved and make the pool open more).
    private var windowStarved = false

    init(epollFD: Int32, eventFD: Int32, timerFD: Int32, batchWindow: Duration, logger: Logger) {
        self.batchWindow = BatchWindow(floor: batchWindow)
        self.epollFD = epollFD
        self.eventFD = eventFD
        self.timerFD = timerFD
        self.logger = logger
    }

    deinit { readBuffer.deallocate() }

    // MARK: - For connections (on this thread)

    /// Adds the connection's socket to the epoll set (readable; writable while `setWriteInterest`).
    func register(_ connection: ConnectionIO) -> Bool {
        guard cnghttp2_epoll_ctl(epollFD, EPOLL_CTL_ADD, connection.fd, cnghttp2_epollin() | cnghttp2_epollerr_hup(), UInt64(connection.loopToken)) == 0 else {
            return false
        }
        connections[connection.loopToken] = connection
        return true
    }

    func setWriteInterest(_ connection: ConnectionIO, _ on: Bool) {
        let events = cnghttp2_epollin() | cnghttp2_epollerr_hup() | (on ? cnghttp2_epollout() : 0)
        _ = cnghttp2_epoll_ctl(epollFD, EPOLL_CTL_MOD, connection.fd, events, UInt64(connection.loopToken))
    }

    /// Removes the connection's socket from the epoll set; call before closing it.
    func deregister(_ connection: ConnectionIO) {
        _ = cnghttp2_epoll_ctl(epollFD, EPOLL_CTL_DEL, connection.fd, 0, 0)
        connections[connection.loopToken] = nil
    }

    /// Wakes connection `id` at `deadline` (`timerFired`, then `process`).
    func schedule(at deadline: MonotonicInstant, connection id: Int) {
        timers.schedule(at: deadline, .connection(id))
    }

    func schedule(at deadline: MonotonicInstant, _ work: @escaping @Sendable () -> Void) {
        timers.schedule(at: deadline, .work(work))
    }

    /// The connection has something to do this turn.
    func markDirty(_ connection: ConnectionIO) {
        guard !connection.isDirty else { return }
        connection.isDirty = true
        dirty.append(connection)
    }

    func wake(connection id: Int) {
        if let connection = connections[id] { markDirty(connection) }
    }

    func readAgainNextTurn(_ connection: ConnectionIO) { readAgain.append(connection) }

    /// APNs answered a request `seconds` after it was handed to a connection (the batch window follows).
    func observeAnswer(seconds: Double) { batchWindow.answered(after: seconds) }

    /// A connection's send window is nearly used up (see `windowStarved`).
    func noteWindowStarved() { windowStarved = true }

    /// Ends `request` with `result` at the end of this turn, with the turn's other completions.
    func complete(_ request: StreamRequest, _ result: Result<APNsResponse, APNsClientError>) {
        // Each attempt ends once (a second ending would resume its caller twice).
        guard request.end() else { return }
        completed.append((request, result))
    }

    /// Runs `body` after this turn's completions (a connection's `.closed` comes after its requests ended).
    func afterCompletions(_ body: @escaping () -> Void) { afterCompletions.append(body) }

    // MARK: - The loop

    func run() {
        let capacity = 256
        var tokens = [UInt64](repeating: 0, count: capacity)
        var events = [UInt32](repeating: 0, count: capacity)
        var woken: [Int] = []
        var work: [APNsEventLoop.Work] = []
        var processing: [ConnectionIO] = []
        while !stopping {
            let busy = !dirty.isEmpty || !readAgain.isEmpty || !completed.isEmpty || loop.hasInbox
            if !busy, let last = lastBusyTurn {
                lastBusyTurn = nil
                Self.sleep(until: last + (windowStarved ? batchWindow.floor : batchWindow.current))
            }
            windowStarved = false
            let n = tokens.withUnsafeMutableBufferPointer { t in
                events.withUnsafeMutableBufferPointer { e in
                    cnghttp2_epoll_wait(epollFD, t.baseAddress, e.baseAddress, Int32(capacity), busy ? 0 : -1)
                }
            }
            now = .now
            if n > 0 && batchWindow.floor > .zero { lastBusyTurn = now }
            if n < 0 && errno != EINTR {
                logger.critical("epoll_wait failed: errno \(errno)")
                Self.sleep(until: now + .milliseconds(100))  // not a busy spin if it keeps failing
            }
            for i in 0..<max(0, Int(n)) {
                switch tokens[i] {
                case APNsEventLoop.eventToken:
                    var value: UInt64 = 0
                    _ = read(eventFD, &value, 8)
                case APNsEventLoop.timerToken:
                    var value: UInt64 = 0
                    _ = read(timerFD, &value, 8)
                    armedFor = nil
                default:
                    guard let connection = connections[Int(tokens[i])] else { continue }
                    if events[i] & cnghttp2_epollout() != 0 { connection.writable() }
                    if events[i] & (cnghttp2_epollin() | cnghttp2_epollerr_hup()) != 0 { connection.readable() }
                    markDirty(connection)
                }
            }
            if !readAgain.isEmpty {
                swap(&processing, &readAgain)
                for connection in processing {
                    connection.readable()
                    markDirty(connection)
                }
                processing.removeAll(keepingCapacity: true)
            }
            loop.takeInbox(into: &woken, &work)
            for body in work { body(self) }
            work.removeAll(keepingCapacity: true)
            for id in woken { wake(connection: id) }
            woken.removeAll(keepingCapacity: true)
            while let timer = timers.popDue(now: now) {
                switch timer {
                case .connection(let id):
                    if let connection = connections[id] {
                        connection.timerFired()
                        markDirty(connection)
                    }
                case .work(let body):
                    body()
                }
            }
            // Completions free streams and hand them to waiting requests, which go out in the same turn
            // (a few rounds at most; what is left goes next turn, without waiting).
            for _ in 0..<4 where !dirty.isEmpty || !completed.isEmpty || !afterCompletions.isEmpty {
                swap(&processing, &dirty)
                for connection in processing {
                    connection.isDirty = false
                    connection.process(now: now)
                }
                processing.removeAll(keepingCapacity: true)
                runCompletions()
            }
            batchWindow.turned(at: now)
            armTimer()
        }
        shutDown()
    }

    /// Sleeps until `deadline` (the batch window's end); returns at once when it has passed.
    private static func sleep(until deadline: MonotonicInstant) {
        let left = (deadline - .now).nanoseconds
        guard left > 0 else { return }
        var request = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }

    /// The turn's completions, in one go, then what waits for them. Either may hand new work to this loop
    /// (a resend, a waiting request given a stream): that goes out next turn, without waiting.
    private func runCompletions() {
        var batch: [(StreamRequest, Result<APNsResponse, APNsClientError>)] = []
        while !completed.isEmpty || !afterCompletions.isEmpty {
            swap(&batch, &completed)
            // One call per pool (usually one per loop): its accounting takes its lock once for the batch.
            var start = 0
            while start < batch.count {
                let pool = batch[start].0.pool
                var end = start + 1
                while end < batch.count && batch[end].0.pool === pool { end += 1 }
                if let baseline = pool.completed(batch[start..<end]) { batchWindow.baseline = baseline }
                start = end
            }
            batch.removeAll(keepingCapacity: true)
            let after = afterCompletions
            afterCompletions.removeAll()
            for body in after { body() }
        }
    }

    private func armTimer() {
        let earliest = timers.earliest
        guard earliest != armedFor else { return }
        armedFor = earliest
        let nanoseconds = earliest.map { max(0, ($0 - MonotonicInstant.now).nanoseconds) } ?? -1
        _ = cnghttp2_timerfd_arm(timerFD, nanoseconds)
    }

    /// The loop stops: what was handed over last runs (a connection arriving now is started and then
    /// aborted with the rest), every connection ends as lost, due timers' work runs, later hand-overs are
    /// refused. The descriptors are closed when the loop object goes (`APNsEventLoop.deinit`).
    private func shutDown() {
        var woken: [Int] = []
        var work: [APNsEventLoop.Work] = []
        loop.takeInbox(into: &woken, &work, finally: true)
        for body in work { body(self) }
        for connection in connections.values { connection.abort("the APNs event loop stopped") }
        runCompletions()
        for body in timers.removeAll() {
            if case .work(let work) = body { work() }
        }
        runCompletions()
        loop = nil
    }
}
