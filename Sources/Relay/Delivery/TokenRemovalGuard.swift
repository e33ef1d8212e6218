import APNsCore
import ServiceSupport

/// Decides whether a BadDeviceToken answer may become a removed-token record, so that a misconfiguration
/// cannot wipe a customer's token database.
///
/// A wrong environment (or a wrong credential or topic) turns every valid device token into
/// 400 BadDeviceToken, and producers act on removed-token records by deleting tokens. Deleting a good token
/// cannot be taken back by the relay (the device is silent until its app registers again); withholding a
/// removal can (the next push to a truly bad token answers BadDeviceToken again, and the result of every
/// push still says BadDeviceToken). So when in doubt the guard withholds.
///
/// The decisions, and why:
/// - **What is counted.** Distinct targets (device tokens, or channels) of one (credential, environment)
///   that got an APNs answer, by their last final answer, over a sliding `window`. Targets, not answers: one
///   deleted channel (or a bad token of a chatty app) sent to far more often than the others would otherwise
///   make the share implausible and withhold its own removal. 410s (Unregistered and ExpiredToken) are
///   counted but never pass through the guard's decision: APNs' 410 is authoritative for the token and
///   carries its timestamp, so those records are always published.
/// - **Memory.** Exact up to `Self.sampleCapacity` targets in the window; beyond, a fixed half, quarter, …
///   of all targets (chosen by their hash, so a target is always in or always out) stands for the rest:
///   the share is measured on thousands of targets, and memory stays bounded however many there are.
/// - **When a BadDeviceToken removal is published.** Only when the window, counting this answer, shows a
///   BadDeviceToken share below `badDeviceTokenPercent` and the guard is not tripped. This applies below
///   the minimum sample too: a small sample cannot tell a misconfiguration from noise, and publishing
///   whatever arrives before the sample is reached would let a quiet (credential, environment), one that
///   never reaches `minimumSample` pushes per window, lose its whole token database slowly. The cost is
///   that a BadDeviceToken with few other answers around it (a lone test push, the first answers after a
///   start) gets no removal record now; it gets one on a later push, once the window shows it plausible.
///   Removals are dropped, not held for later: holding would delay the event's offset or need a buffer
///   that a crash loses anyway.
/// - **When the guard trips** (a critical log, the gauge). When the window holds at least `minimumSample`
///   answers and the share is at or above the threshold. Below the sample the share is too noisy for an
///   alarm, so withheld removals there are only counted.
/// - **What ends it.** An answer after which the share is below four fifths of the threshold (40 % by
///   default), whatever the sample. The margin keeps a share that hovers at the threshold (a producer
///   that sends every token to both environments answers exactly 50 %) from flapping the alarm; while
///   tripped, every BadDeviceToken removal is withheld.
///
/// Time is passed in (no clock in here); the window is counted in `Self.slices` slices, so a target
/// leaves it between `window - window / slices` and `window` after its last answer. A `now` earlier than
/// one already seen (the relay counts an answer at its attempt's start, and attempts are answered out of
/// order) counts in the latest slice. Keys are few (credentials × 2 environments × 2 target kinds).
package struct TokenRemovalGuard: Sendable {
    /// When BadDeviceToken answers are too many to be believed.
    package struct Configuration: Sendable, Hashable {
        /// At or above this share (in percent) of one (credential, environment)'s answers in the window,
        /// BadDeviceToken removals are withheld.
        package var badDeviceTokenPercent: Int = 50
        /// The answers in the window needed before the guard trips (logs critical, sets the gauge).
        package var minimumSample: Int = 200
        /// The sliding window answers are counted over.
        package var window: Duration = .seconds(60)

        package init() {}
    }

    /// Whose answers are counted together: one credential in one environment, device pushes and
    /// broadcasts apart (a busy device stream must not vouch for a misdirected broadcast one).
    package struct Key: Hashable, Sendable, CustomStringConvertible {
        package var credential: String
        package var environment: APNsEnvironment
        package var targets: Targets

        package init(credential: String, environment: APNsEnvironment, targets: Targets = .deviceTokens) {
            self.credential = credential
            self.environment = environment
            self.targets = targets
        }

        package var description: String { "\(credential)/\(environment.rawValue)" + (targets == .channels ? " broadcasts" : "") }
    }

    /// What a removal removes, and the answer that asks for it.
    package enum Targets: Sendable, Hashable {
        /// BadDeviceToken: a wrong environment turns every token into one.
        case deviceTokens
        /// ChannelNotRegistered: channel ids are valid in one environment only, so the same holds.
        case channels

        /// The APNs reason whose removals the guard screens.
        package var reason: APNsReason { self == .channels ? .channelNotRegistered : .badDeviceToken }
        /// The records it withholds, for logs.
        package var record: String { self == .channels ? "removed-channel" : "removed-token" }
        /// The requests it counts, for logs.
        package var requests: String { self == .channels ? "broadcasts" : "pushes" }
    }

    /// An APNs answer, as far as the guard cares.
    package enum Answer: Sendable, Hashable {
        case badDeviceToken
        /// Any other answer (200, 410, another rejection, a retriable status that ran out).
        case other
    }

    /// What the window holds after an answer: distinct targets (estimated, once they are more than
    /// `sampleCapacity`), and how many of them answered BadDeviceToken (ChannelNotRegistered) last.
    package struct Sample: Sendable, Hashable {
        package var answers: Int
        package var badDeviceTokens: Int
        package var percent: Double { answers == 0 ? 0 : Double(badDeviceTokens) * 100 / Double(answers) }
    }

    package enum Change: Sendable, Hashable {
        /// The guard tripped: BadDeviceToken removals of this key are withheld from now on.
        case tripped(Sample)
        /// The share fell well below the threshold: removals are published again. `withheld` counts the
        /// BadDeviceToken removals withheld while it was tripped.
        case ended(Sample, withheld: Int)
    }

    /// What to do with one answer.
    package struct Verdict: Sendable, Hashable {
        /// For a BadDeviceToken answer, whether its removed-token record may be published; `false` for others.
        package var publishesRemoval: Bool
        /// Whether this answer's removal was withheld (a BadDeviceToken whose removal is not published).
        package var withholdsRemoval: Bool
        /// Set when this answer tripped or ended the guard of its key.
        package var change: Change?
        package var sample: Sample
    }

    /// How finely the window slides.
    package static let slices = 20
    /// Targets a key's window remembers at most (about 100 KiB); beyond, it samples (see the type's comment).
    package static let sampleCapacity = 4_096

    /// A target in the window: the slice of its last answer, and whether that answer was BadDeviceToken.
    private struct Seen {
        var slice: Int64
        var bad: Bool
    }

    private struct Tally {
        /// The window's targets, by hash: all of them, or those of the sample (`level`).
        var seen: [UInt64: Seen] = [:]
        var bad = 0
        /// Targets are in the sample when their hash's top `level` bits are zero (one in 2^level).
        var level = 0
        var latest: Int64 = 0
        var tripped = false
        var withheldWhileTripped = 0

        func samples(_ hash: UInt64) -> Bool { level == 0 || hash >> (64 - level) == 0 }

        /// Forgets the targets whose last answer left the window, and those out of the sample. A sample
        /// that shrank to a quarter of the table widens again (a burst must not leave a quiet key judged on a
        /// handful of targets); targets it admits again are counted from their next answer.
        mutating func prune(before slice: Int64) {
            seen = seen.filter { $0.value.slice >= slice && samples($0.key) }
            bad = seen.values.reduce(0) { $0 + ($1.bad ? 1 : 0) }
            while level > 0, seen.count < TokenRemovalGuard.sampleCapacity / 4 { level -= 1 }
        }
    }

    package let configuration: Configuration
    private let origin: MonotonicInstant
    private let sliceNanoseconds: Int64
    private var tallies: [Key: Tally] = [:]

    /// - Parameter origin: any instant at or before the first `now` passed in.
    package init(configuration: Configuration, origin: MonotonicInstant) {
        self.configuration = configuration
        self.origin = origin
        sliceNanoseconds = max(1, Self.nanoseconds(configuration.window) / Int64(Self.slices))
    }

    /// Whether the guard of `key` is tripped.
    package func isTripped(_ key: Key) -> Bool {
        tallies[key]?.tripped ?? false
    }

    /// Counts `answer` of `target` for `key` at `now` and says whether a BadDeviceToken removal may be published.
    package mutating func record(
        _ answer: Answer, of target: PushTarget, for key: Key, at now: MonotonicInstant
    ) -> Verdict {
        let slice = Self.nanoseconds(now - origin) / sliceNanoseconds
        // In place: a copy of the tally would copy its table on every answer.
        return Self.record(answer, of: Self.hash(target), inSlice: slice, configuration: configuration, tally: &tallies[key, default: Tally()])
    }

    private static func record(_ answer: Answer, of target: UInt64, inSlice now: Int64, configuration: Configuration, tally: inout Tally) -> Verdict {
        let slice = max(now, tally.latest)
        if slice > tally.latest {
            tally.latest = slice
            tally.prune(before: slice - Int64(Self.slices) + 1)
        }
        let isBad = answer == .badDeviceToken
        if tally.samples(target) {
            let previous = tally.seen.updateValue(Seen(slice: slice, bad: isBad), forKey: target)
            tally.bad += (isBad ? 1 : 0) - (previous?.bad == true ? 1 : 0)
            if tally.seen.count > Self.sampleCapacity {
                tally.level += 1
                tally.prune(before: slice - Int64(Self.slices) + 1)
            }
        }
        let sample = Sample(answers: tally.seen.count << tally.level, badDeviceTokens: tally.bad << tally.level)
        // Shares compared in integers, on the sample: bad / all ≥ percent / 100, and < (4/5 · percent) / 100.
        // An empty sample (this target is not in it, and no other answered lately) says nothing: judged as
        // this answer alone, as a first answer is.
        let (sampled, sampledBad) = tally.seen.isEmpty ? (1, isBad ? 1 : 0) : (tally.seen.count, tally.bad)
        let percent = configuration.badDeviceTokenPercent
        let atThreshold = sampledBad * 100 >= percent * sampled
        let wellBelow = sampledBad * 100 * 5 < percent * 4 * sampled
        // The alarm needs the targets themselves, not their estimate: a few sampled ones scaled up must not
        // trip it.
        let enough = sample.answers >= configuration.minimumSample && sampled >= min(configuration.minimumSample, Self.sampleCapacity / 2)
        var change: Change?
        if !tally.tripped, atThreshold, enough {
            tally.tripped = true
            change = .tripped(sample)
        } else if tally.tripped, wellBelow {
            tally.tripped = false
            change = .ended(sample, withheld: tally.withheldWhileTripped)
            tally.withheldWhileTripped = 0
        }
        let publishes = answer == .badDeviceToken && !tally.tripped && !atThreshold
        if tally.tripped, answer == .badDeviceToken { tally.withheldWhileTripped += 1 }
        return Verdict(
            publishesRemoval: publishes, withholdsRemoval: answer == .badDeviceToken && !publishes,
            change: change, sample: sample
        )
    }

    /// A target's 64-bit hash, the same in every process (FNV-1a over its id, then SplitMix64's finalizer to
    /// spread FNV's low-entropy top bits, which choose the sample).
    static func hash(_ target: PushTarget) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ text: String, kind: UInt8) {
            hash = (hash ^ UInt64(kind)) &* 0x100_0000_01b3
            var text = text  // (a native string's bytes, read in place: faster than iterating its UTF8View)
            text.withUTF8 { bytes in
                for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            }
        }
        switch target {
        case .device(let token):
            // Its hex digits, as they were hashed when the token was held as text (no String made).
            hash = (hash ^ 1) &* 0x100_0000_01b3
            token.forEachHexDigit { hash = (hash ^ UInt64($0)) &* 0x100_0000_01b3 }
        case .channel(let channel): mix(channel.base64, kind: 2)
        }
        hash = (hash ^ (hash >> 30)) &* 0xbf58_476d_1ce4_e5b9
        hash = (hash ^ (hash >> 27)) &* 0x94d0_49bb_1331_11eb
        return hash ^ (hash >> 31)
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
