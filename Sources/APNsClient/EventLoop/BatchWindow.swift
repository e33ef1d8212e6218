import ServiceSupport

/// How long a busy event loop waits before it turns again (see `EventLoopCore`): `floor`
/// (`apns.batchWindowMs`), longer while answers arrive too slowly to fill a turn.
///
/// Long enough to gather `answersPerTurn` answers at the rate they arrive, but never more than `ceiling`,
/// nor more than the larger of a tenth of the time APNs takes to answer and half the queue at APNs: the
/// answer time above `baseline`, the path's time without a queue that the pool's adaptive limit measures.
/// A queue at APNs means APNs bounds the rate, not the path: answers read a few milliseconds later cost
/// nothing there. Against a server answering 1.5k/s, where the limit keeps about 20 ms of answer time over
/// a path of a few ms, that is about 8 ms instead of the tenth's 2 ms (session 16, 5 pairs: 0.73 → 0.55
/// context switches and 3–39 % less CPU per event). A long path without a queue (40 ms RTT) gets a tenth:
/// there, with a bounded number of streams, what a push waits bounds how many go per second (when the
/// window grew with the answer time alone, that benchmark lost 10 % of its throughput). A fast server, or a
/// busy loop whose turns fill anyway, keeps `floor`, and so does a loop with a connection short of send
/// window (`EventLoopCore`). A `floor` of zero turns on every event, whatever the rate.
struct BatchWindow {
    let floor: Duration
    /// The longest the window grows to while APNs answers slowly.
    static let ceiling = Duration.milliseconds(10)
    /// How many answers a turn should gather before the window stops growing.
    static let answersPerTurn = 16.0
    /// How often the answer rate, and with it the window, is measured again.
    static let rateInterval = Duration.milliseconds(100)

    /// The window now.
    private(set) var current: Duration
    /// How long APNs takes to answer (moving average, seconds).
    private(set) var answerTime: Double = 0
    /// Answers per second (moving average over `rateInterval`s).
    private(set) var answerRate: Double = 0
    /// The answer time of the path without a queue at APNs (the pool's adaptive limit measures it), seconds;
    /// 0 while unknown. A loop serving several pools follows whichever answered last.
    var baseline: Double = 0
    private var answersSinceRate = 0
    private var rateSince: MonotonicInstant?

    init(floor: Duration) {
        self.floor = floor
        self.current = floor
    }

    /// APNs answered a request `seconds` after it was handed to a connection.
    mutating func answered(after seconds: Double) {
        answerTime = answerTime == 0 ? seconds : answerTime * 0.98 + seconds * 0.02
        answersSinceRate += 1
    }

    /// The loop turned at `now`: once per `rateInterval`, the rate is measured and the window follows.
    mutating func turned(at now: MonotonicInstant) {
        guard let since = rateSince else {
            rateSince = now
            return
        }
        let elapsed = now - since
        guard elapsed >= Self.rateInterval else { return }
        let rate = Double(answersSinceRate) / elapsed.seconds
        answerRate = answerRate == 0 ? rate : answerRate * 0.7 + rate * 0.3
        answersSinceRate = 0
        rateSince = now
        guard floor > .zero, answerRate > 0 else { return }
        let queued = baseline > 0 ? max(0, answerTime - baseline) / 2 : 0
        let wanted = min(Self.answersPerTurn / answerRate, max(answerTime / 10, queued), Self.ceiling.seconds)
        current = max(floor, .nanoseconds(Int64(wanted * 1e9)))
    }
}
