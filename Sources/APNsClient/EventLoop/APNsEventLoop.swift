import APNsCore
import CNGHTTP2
import Glibc
import Logging
import ServiceSupport
import Synchronization

/// One thread running an epoll loop that serves many APNs connections: their sockets, one eventfd through
/// which other threads hand it work, and one timerfd for every deadline on it (requests, PINGs, connects,
/// the pools' timers). A few of these (`APNsEventLoopGroup`) serve every connection of the process, so the
/// number of threads does not grow with the number of connections, and one wake-up serves whatever became
/// ready meanwhile.
///
/// A turn: wait (epoll) → read the ready sockets (nghttp2 callbacks end requests) → take what other threads
/// handed over (requests, drains, cancellations, work) → fire due timers → let each connection that has
/// something to do submit, expire and write (one coalesced `SSL_write` each) → run the turn's completions,
/// together → arm the timer for the earliest deadline.
final class APNsEventLoop: Sendable {
    /// Work for the loop's thread, from any thread.
    typealias Work = @Sendable (EventLoopCore) -> Void

    private struct Inbox {
        /// Connections (by id) that have requests or commands waiting in their own inbox.
        var woken: [Int] = []
        var work: [Work] = []
        /// The eventfd was written since the loop last took the inbox: later senders need not write it again.
        var wakePending = false
        /// The loop has stopped (or is stopping): nothing handed over from now on would run.
        var stopped = false
        var isEmpty: Bool { woken.isEmpty && work.isEmpty }
    }

    let name: String
    private let inbox = BlockingMutex(Inbox())
    private let epollFD: Int32
    private let eventFD: Int32
    private let timerFD: Int32
    /// What only the loop's thread touches.
    private let core: LoopConfined<EventLoopCore>
    /// The loop thread's `pthread_self()`, set by the thread as it starts (0 before).
    private let thread = ThreadIdentity()
    private let started = Atomic<Bool>(false)
    /// Set when the loop's thread has ended.
    private let ended = Latch<Void>()

    static let eventToken = UInt64.max
    static let timerToken = UInt64.max - 1

    /// Sets the loop up; its thread starts with `start()`.
    /// - Throws: `APNsClientError` when the kernel refuses an epoll set, an eventfd or a timerfd.
    /// - Parameter batchWindow: while busy, the loop turns at most once per this window (see `EventLoopCore`).
    init(name: String, batchWindow: Duration, logger: Logger) throws(APNsClientError) {
        self.name = name
        let epollFD = cnghttp2_epoll_create()
        let eventFD = cnghttp2_eventfd_nonblocking()
        let timerFD = cnghttp2_timerfd_create()
        guard epollFD >= 0, eventFD >= 0, timerFD >= 0,
            cnghttp2_epoll_ctl(epollFD, EPOLL_CTL_ADD, eventFD, cnghttp2_epollin(), Self.eventToken) == 0,
            cnghttp2_epoll_ctl(epollFD, EPOLL_CTL_ADD, timerFD, cnghttp2_epollin(), Self.timerToken) == 0
        else {
            let error = errno
            for fd in [epollFD, eventFD, timerFD] where fd >= 0 { close(fd) }
            throw APNsClientError(transport: .connectFailed, "cannot set up the APNs event loop: \(String(cString: strerror(error)))", underlyingCode: Int(error))
        }
        self.epollFD = epollFD
        self.eventFD = eventFD
        self.timerFD = timerFD
        var logger = logger
        logger[metadataKey: "apns.loop"] = "\(name)"
        self.core = LoopConfined(EventLoopCore(epollFD: epollFD, eventFD: eventFD, timerFD: timerFD, batchWindow: batchWindow, logger: logger))
    }

    /// Starts the loop's thread (once; `APNsEventLoopGroup.run()` does). Work handed over before runs in its
    /// first turn.
    /// - Throws: `APNsClientError` when the kernel refuses the thread.
    func start() throws(APNsClientError) {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // The core keeps the loop until its thread ends (`run` lets go of it last).
        core.value.loop = self
        let core = self.core
        let thread = self.thread
        let ended = self.ended
        do {
            try DedicatedThread.start(name: name) {
                thread.value.store(UInt(pthread_self()), ordering: .releasing)
                core.claim()
                core.value.run()
                ended.set()
            }
        } catch {
            core.value.loop = nil
            ended.set()
            throw APNsClientError(transport: .connectFailed, "\(error)", underlyingCode: Int(error.code))
        }
    }

    /// Waits until the loop's thread has ended (after `stop()`); at once for a loop never started.
    func waitUntilEnded() async {
        guard started.load(ordering: .acquiring) else { return }
        await ended.wait()
    }

    /// Whether the caller runs on this loop's thread.
    var inLoop: Bool { thread.value.load(ordering: .acquiring) == UInt(pthread_self()) }

    /// Runs `work` on the loop's thread, in its next turn (or this one, when called from the loop).
    /// - Returns: `false` when the loop has stopped: `work` will never run (the caller cleans up).
    @discardableResult
    func execute(_ work: @escaping Work) -> Bool {
        let (accepted, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            guard !inbox.stopped else { return (false, false) }
            inbox.work.append(work)
            defer { inbox.wakePending = true }
            return (true, !inbox.wakePending)
        }
        if wake && !inLoop { signal() }
        return accepted
    }

    /// Runs `work` on the loop's thread once `delay` has passed.
    func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) {
        execute { core in core.schedule(at: core.now.advanced(by: delay), work) }
    }

    /// Connection `id` (its `loopToken`, on this loop) has requests or commands in its inbox. Only the first connection woken
    /// since the loop last looked writes the eventfd: a burst of requests to many connections is one wake-up.
    func wake(connection id: Int) {
        if inLoop {
            core.value.wake(connection: id)
            return
        }
        let wake = inbox.withLock { inbox -> Bool in
            guard !inbox.stopped else { return false }
            inbox.woken.append(id)
            defer { inbox.wakePending = true }
            return !inbox.wakePending
        }
        if wake { signal() }
    }

    /// Ends the loop's thread after its current turn (connections still on it are closed as lost). Work
    /// handed over later is refused (`execute` returns `false`).
    func stop() {
        execute { core in core.stopping = true }
    }

    /// The descriptors outlive the thread: a sender holding this loop may still write the eventfd.
    deinit {
        close(epollFD)
        close(eventFD)
        close(timerFD)
    }

    private func signal() {
        var one: UInt64 = 1
        _ = write(eventFD, &one, 8)
    }

    /// Called by the loop's thread: what other threads handed over since the last call. `finally`: the loop
    /// stops; later hand-overs are refused.
    func takeInbox(into woken: inout [Int], _ work: inout [Work], finally: Bool = false) {
        inbox.withLock { inbox in
            swap(&woken, &inbox.woken)
            swap(&work, &inbox.work)
            inbox.wakePending = false
            if finally { inbox.stopped = true }
        }
    }

    var hasInbox: Bool { inbox.withLock { !$0.isEmpty } }
}
