/// Which refused events get a log line: at most `linesPerInterval` per reason in each `interval`, the rest
/// counted and reported by the next line of their reason ("suppressed N"). A producer sending a flood of
/// invalid events would otherwise write a line for each; the results and `apns_relay_results_total`
/// (by outcome and reason) still count every one.
///
/// A value type with no I/O and no clock of its own (the caller passes the time): keep it behind a lock.
struct RefusalLogBudget: Sendable {
    /// What to do with one refused event's log line.
    enum Decision: Equatable, Sendable {
        /// Write it, saying how many lines of this reason were left out since the last one written.
        case log(suppressed: Int)
        /// Leave it out (it is counted for the next line).
        case suppress
    }

    /// Reasons come from the relay's own codes and APNs' table, a few dozen; past this many, the rest
    /// share one budget so the table cannot grow without bound.
    static let maxReasons = 64
    static let otherReasons = "(other reasons)"

    let linesPerInterval: Int
    let intervalNanoseconds: Int64

    private struct Window {
        var start: Int64
        var lines: Int
        var suppressed: Int
    }

    private var windows: [String: Window] = [:]

    init(linesPerInterval: Int = 10, interval: Duration = .seconds(10)) {
        precondition(linesPerInterval > 0, "a log budget writes at least one line per interval")
        self.linesPerInterval = linesPerInterval
        let (seconds, attoseconds) = interval.components
        self.intervalNanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Whether the refusal of `reason` at `nowNanoseconds` gets its log line.
    mutating func admit(_ reason: String, nowNanoseconds now: Int64) -> Decision {
        let key = windows[reason] != nil || windows.count < Self.maxReasons ? reason : Self.otherReasons
        var window = windows[key] ?? Window(start: now, lines: 0, suppressed: 0)
        // A new interval, or a clock that went back: the budget starts over (the count of lines left out stays).
        if now - window.start >= intervalNanoseconds || now < window.start {
            window.start = now
            window.lines = 0
        }
        let decision: Decision
        if window.lines < linesPerInterval {
            window.lines += 1
            decision = .log(suppressed: window.suppressed)
            window.suppressed = 0
        } else {
            window.suppressed += 1
            decision = .suppress
        }
        windows[key] = window
        return decision
    }
}
