import APNsCore
import Foundation
import Logging
import RelayApp
import ServiceSupport
import Synchronization
import TestSupport
import Testing
@testable import Relay

/// The guard that keeps a misconfiguration (every token answering BadDeviceToken) from publishing removals:
/// its state machine with time passed in, and its lock-holding screen, all without I/O.
@Suite struct TokenRemovalGuardTests {
    typealias Key = TokenRemovalGuard.Key
    static let production = Key(credential: "acme", environment: .production)
    static let development = Key(credential: "acme", environment: .development)
    static let otherCredential = Key(credential: "beta", environment: .production)

    /// The `n`th device token (distinct for each `n`).
    static func token(_ n: Int) -> PushTarget {
        .device(try! DeviceToken(hex: String(repeating: "0", count: 48) + String(format: "%016x", n)))
    }

    /// A guard at a fixed origin; `at` is seconds after it. 60 s window (slices of 3 s), 50 %, sample 10.
    /// Each answer recorded without a target comes from a device token of its own.
    struct Machine {
        let origin = MonotonicInstant.now
        var machine: TokenRemovalGuard
        private var tokens = 0

        init(percent: Int = 50, minimumSample: Int = 10, window: Duration = .seconds(60)) {
            var configuration = TokenRemovalGuard.Configuration()
            configuration.badDeviceTokenPercent = percent
            configuration.minimumSample = minimumSample
            configuration.window = window
            machine = TokenRemovalGuard(configuration: configuration, origin: origin)
        }

        @discardableResult
        mutating func record(
            _ answer: TokenRemovalGuard.Answer, _ key: Key = production, at seconds: Double = 0, from target: PushTarget? = nil
        ) -> TokenRemovalGuard.Verdict {
            tokens += 1
            return machine.record(answer, of: target ?? TokenRemovalGuardTests.token(tokens), for: key, at: origin + .milliseconds(Int64(seconds * 1000)))
        }

        /// Records `count` answers and returns their verdicts.
        mutating func record(_ count: Int, _ answer: TokenRemovalGuard.Answer, _ key: Key = production, at seconds: Double = 0) -> [TokenRemovalGuard.Verdict] {
            (0..<count).map { _ in record(answer, key, at: seconds) }
        }
    }

    /// The sample is chosen by the target's hash, which every replica (and every version) must compute alike:
    /// FNV-1a over a kind byte (1) and the token's lower-case hex, then SplitMix64's finalizer. The value was
    /// computed apart from this code, from that definition.
    @Test func aTokensHashIsTheSameInEveryProcessAndVersion() throws {
        let token = try DeviceToken(hex: String(repeating: "0123456789ABCDEF", count: 4))
        #expect(TokenRemovalGuard.hash(.device(token)) == 0x6e4f_6502_297b_efec)
    }

    @Test func badDeviceTokenRemovalsArePublishedWhileTheirShareIsPlausible() {
        var guardian = Machine()
        _ = guardian.record(19, .other)
        let verdict = guardian.record(.badDeviceToken)
        #expect(verdict.publishesRemoval && !verdict.withholdsRemoval)
        #expect(verdict.change == nil)
        #expect(verdict.sample == .init(answers: 20, badDeviceTokens: 1))
        let good = guardian.record(.other)
        #expect(!good.publishesRemoval && !good.withholdsRemoval, "other answers have no removal to publish or withhold")
    }

    @Test func tripsWhenTheShareReachesTheThresholdWithTheMinimumSample() {
        var guardian = Machine()
        _ = guardian.record(5, .other)
        // 1/6, 2/7, 3/8, 4/9: below 50 %, published.
        for verdict in guardian.record(4, .badDeviceToken) {
            #expect(verdict.publishesRemoval && verdict.change == nil, "\(verdict)")
        }
        #expect(!guardian.machine.isTripped(Self.production))
        // 5/10 = 50 % with the sample of 10: trips, and this removal is already withheld.
        let tripping = guardian.record(.badDeviceToken)
        #expect(tripping.change == .tripped(.init(answers: 10, badDeviceTokens: 5)))
        #expect(!tripping.publishesRemoval && tripping.withholdsRemoval)
        #expect(guardian.machine.isTripped(Self.production))
        let next = guardian.record(.badDeviceToken)
        #expect(next.withholdsRemoval && next.change == nil, "tripped once, announced once")
    }

    @Test func justBelowTheThresholdAtTheMinimumSampleDoesNotTrip() {
        var guardian = Machine()
        _ = guardian.record(6, .other)
        let verdicts = guardian.record(4, .badDeviceToken)  // 4/10 = 40 %
        #expect(verdicts.allSatisfy { $0.publishesRemoval && $0.change == nil }, "\(verdicts)")
        #expect(guardian.record(.badDeviceToken).publishesRemoval, "5/11 = 45 %")
        #expect(guardian.record(.badDeviceToken).change == .tripped(.init(answers: 12, badDeviceTokens: 6)), "6/12 = 50 %")
    }

    @Test func theThresholdIsComparedExactly() {
        var guardian = Machine(percent: 30)  // 0.3 · 10 is 3.0000000000000004 in floating point
        _ = guardian.record(7, .other)
        _ = guardian.record(2, .badDeviceToken)
        #expect(guardian.record(.badDeviceToken).change == .tripped(.init(answers: 10, badDeviceTokens: 3)))
    }

    @Test func belowTheMinimumSampleAnImplausibleShareIsWithheldWithoutAnAlarm() {
        var guardian = Machine()
        // A misconfigured quiet (credential, environment): no answer ever makes BadDeviceToken plausible.
        for verdict in guardian.record(9, .badDeviceToken) {
            #expect(verdict.withholdsRemoval && !verdict.publishesRemoval, "\(verdict)")
            #expect(verdict.change == nil, "too small a sample to raise the alarm")
        }
        #expect(!guardian.machine.isTripped(Self.production))
        #expect(guardian.record(.badDeviceToken).change == .tripped(.init(answers: 10, badDeviceTokens: 10)))
    }

    @Test func aLoneBadDeviceTokenIsWithheldUntilTheWindowShowsItPlausible() {
        var guardian = Machine()
        #expect(guardian.record(.badDeviceToken).withholdsRemoval, "1 of 1 answers: implausible")
        #expect(guardian.record(.other).change == nil)
        #expect(guardian.record(.badDeviceToken).withholdsRemoval, "2 of 3 answers")
        _ = guardian.record(3, .other)
        #expect(guardian.record(.badDeviceToken).publishesRemoval, "3 of 7 answers: below 50 %")
    }

    @Test func onceTrippedItEndsOnlyWellBelowTheThreshold() {
        var guardian = Machine()
        _ = guardian.record(10, .badDeviceToken)
        #expect(guardian.machine.isTripped(Self.production))
        #expect(guardian.record(10, .other).allSatisfy { $0.change == nil }, "10/20 = 50 %: still tripped")
        #expect(guardian.record(.badDeviceToken).withholdsRemoval, "11/21")
        _ = guardian.record(4, .other)
        // 12/26 = 46 %: below the threshold but not below four fifths of it (40 %), so still tripped.
        let hovering = guardian.record(.badDeviceToken)
        #expect(hovering.withholdsRemoval && hovering.change == nil, "\(hovering)")
        // 12/30 = 40 % is not below 40 %; 12/31 is.
        #expect(guardian.record(4, .other).allSatisfy { $0.change == nil })
        let ending = guardian.record(.other)
        // Withheld while tripped: the tripping answer, 11/21 and 12/26.
        #expect(ending.change == .ended(.init(answers: 31, badDeviceTokens: 12), withheld: 3))
        #expect(!guardian.machine.isTripped(Self.production))
        #expect(guardian.record(.badDeviceToken).publishesRemoval, "13/32 = 41 %: below the threshold, not tripped")
    }

    @Test func theWindowSlidesAndForgetsAStorm() {
        var guardian = Machine()  // 60 s in slices of 3 s
        _ = guardian.record(10, .badDeviceToken, at: 1)  // slice 0
        _ = guardian.record(10, .badDeviceToken, at: 3)  // slice 1
        #expect(guardian.machine.isTripped(Self.production))
        let late = guardian.record(.other, at: 59.9)  // slice 19: both slices still counted
        #expect(late.sample == .init(answers: 21, badDeviceTokens: 20) && late.change == nil)
        let slid = guardian.record(.other, at: 60)  // slice 20: slice 0 left the window
        #expect(slid.sample == .init(answers: 12, badDeviceTokens: 10) && slid.change == nil, "\(slid.sample)")
        let gone = guardian.record(.other, at: 63)  // slice 21: slice 1 left too
        #expect(gone.change == .ended(.init(answers: 3, badDeviceTokens: 0), withheld: 11), "the tripping answer and the 10 after it")
        _ = guardian.record(.other, at: 64)
        #expect(guardian.record(.badDeviceToken, at: 65).publishesRemoval, "1 of 5 answers in the window")
    }

    @Test func answersLongAfterTheWindowStartFromEmpty() {
        var guardian = Machine()
        _ = guardian.record(19, .other, at: 0)
        #expect(guardian.record(.badDeviceToken, at: 30).publishesRemoval, "1 of 20")
        let later = guardian.record(.badDeviceToken, at: 3600)
        #expect(later.sample == .init(answers: 1, badDeviceTokens: 1), "an hour later nothing of the old window is counted")
        #expect(later.withholdsRemoval)
    }

    @Test func anEarlierInstantCountsInTheLatestSlice() {
        var guardian = Machine()
        _ = guardian.record(10, .other, at: 10)  // slice 3
        // A task that read the clock before another took the lock: counted with the later answers.
        _ = guardian.record(10, .badDeviceToken, at: 2)
        #expect(guardian.machine.isTripped(Self.production))
        #expect(guardian.record(.other, at: 68.9).sample == .init(answers: 21, badDeviceTokens: 10), "slice 22: slice 3 still counted")
        #expect(guardian.record(.other, at: 69).sample == .init(answers: 2, badDeviceTokens: 0), "slice 23: slice 3 left")
    }

    @Test func eachCredentialAndEnvironmentIsGuardedAlone() {
        var guardian = Machine()
        _ = guardian.record(10, .badDeviceToken, Self.production)
        #expect(guardian.machine.isTripped(Self.production))
        #expect(!guardian.machine.isTripped(Self.development))
        #expect(!guardian.machine.isTripped(Self.otherCredential))
        // The other keys' good answers neither dilute the tripped key nor borrow its storm.
        for key in [Self.development, Self.otherCredential] {
            _ = guardian.record(19, .other, key)
            let verdict = guardian.record(.badDeviceToken, key)
            #expect(verdict.publishesRemoval && verdict.sample == .init(answers: 20, badDeviceTokens: 1), "\(key)")
        }
        #expect(guardian.record(.badDeviceToken, Self.production).withholdsRemoval)
        #expect(guardian.record(.other, Self.production).sample == .init(answers: 12, badDeviceTokens: 11))
    }

    /// Targets are counted, not answers: one deleted channel broadcast to ten times as often as the others
    /// is one ChannelNotRegistered channel among eleven, and its removal is published.
    @Test func aTargetAnsweredOftenCountsOnce() throws {
        var guardian = Machine()
        let channels = Key(credential: "acme", environment: .production, targets: .channels)
        let deleted = PushTarget.channel(try ChannelID(base64: "dGhlIGRlbGV0ZWQgb25lIQ=="))
        let live = try (0..<10).map { PushTarget.channel(try ChannelID(base64: Data("live channel \($0)!".utf8).base64EncodedString())) }
        for round in 0..<10 {
            for channel in live { guardian.record(.other, channels, at: Double(round), from: channel) }
            for _ in 0..<9 { guardian.record(.badDeviceToken, channels, at: Double(round), from: deleted) }
            let verdict = guardian.record(.badDeviceToken, channels, at: Double(round), from: deleted)
            #expect(verdict.publishesRemoval, "round \(round): \(verdict.sample)")
            #expect(verdict.sample == .init(answers: 11, badDeviceTokens: 1))
        }
        #expect(!guardian.machine.isTripped(channels))
        // The same target answering differently later counts by its last answer.
        #expect(guardian.record(.other, channels, at: 10, from: deleted).sample == .init(answers: 11, badDeviceTokens: 0))
    }

    /// Past `sampleCapacity` targets in the window the guard counts a hash-chosen share of them: memory stays
    /// bounded and the share stays measured (here 60 % of 40 000 tokens, within a few points).
    @Test func manyTargetsAreSampledAndTheShareHolds() {
        var guardian = Machine(minimumSample: 200)
        var last: TokenRemovalGuard.Verdict?
        for n in 0..<40_000 {
            last = guardian.record(n % 5 < 3 ? .badDeviceToken : .other, at: Double(n) / 1000, from: TokenRemovalGuardTests.token(n))
        }
        let sample = try! #require(last).sample
        #expect(sample.answers > 30_000 && sample.answers < 50_000, "\(sample)")
        #expect(abs(sample.percent - 60) < 5, "\(sample)")
        #expect(guardian.machine.isTripped(Self.production))
        // Once the burst has left the window the sample is whole again: a quiet key is judged on every one
        // of its targets, not on a scaled-up few.
        for n in 0..<19 { guardian.record(.other, at: 200, from: TokenRemovalGuardTests.token(100_000 + n)) }
        let quiet = guardian.record(.badDeviceToken, at: 200, from: TokenRemovalGuardTests.token(200_000))
        #expect(quiet.sample == .init(answers: 20, badDeviceTokens: 1), "\(quiet.sample)")
        #expect(quiet.publishesRemoval && !guardian.machine.isTripped(Self.production))
    }

    @Test func atOneHundredPercentOnlyAnAllBadWindowTrips() {
        var guardian = Machine(percent: 100)
        _ = guardian.record(1, .other)
        #expect(guardian.record(10, .badDeviceToken).allSatisfy { $0.publishesRemoval }, "10/11 is below 100 %")
        var fresh = Machine(percent: 100)
        #expect(fresh.record(10, .badDeviceToken).last?.change == .tripped(.init(answers: 10, badDeviceTokens: 10)))
    }
}

/// The guard's configuration keys (kept here, beside the guard they set).
@Suite struct TokenRemovalGuardConfigurationTests {
    static let required = [
        "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": "/k.p8",
    ]

    @Test func defaultsAndKeysAndEnvironmentVariables() async throws {
        let defaults = try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: Self.required))
        #expect(defaults.relay.tokenRemoval == TokenRemovalGuard.Configuration())
        #expect(defaults.relay.tokenRemoval.badDeviceTokenPercent == 50)
        #expect(defaults.relay.tokenRemoval.minimumSample == 200)
        #expect(defaults.relay.tokenRemoval.window == .seconds(60))

        let set = try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(
            file: nil,
            environment: ["APNS_RELAY_RELAY_TOKEN_REMOVAL_BAD_DEVICE_TOKEN_PERCENT": "80"],
            overrides: Self.required.merging(["relay.tokenRemoval.minimumSample": "20", "relay.tokenRemoval.windowMs": "5000"]) { $1 }
        ))
        #expect(set.relay.tokenRemoval.badDeviceTokenPercent == 80)
        #expect(set.relay.tokenRemoval.minimumSample == 20)
        #expect(set.relay.tokenRemoval.window == .seconds(5))
    }

    @Test(arguments: [
        ("relay.tokenRemoval.badDeviceTokenPercent", "0"), ("relay.tokenRemoval.badDeviceTokenPercent", "0.5"),
        ("relay.tokenRemoval.minimumSample", "0"), ("relay.tokenRemoval.windowMs", "10"),
    ])
    func outOfRangeValuesAreRefusedWithTheKeyNamed(key: String, value: String) async throws {
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: Self.required.merging([key: value]) { $1 })
        let error = try #require(throws: ConfigurationError.self) { try RelayAppConfiguration(reader: reader) }
        #expect("\(error)".contains(key), "\(error)")
    }
}

/// `TokenRemovalScreen`: the guard behind its lock, deciding from delivery reports, logging its changes once.
@Suite struct TokenRemovalScreenTests {
    final class Clock: Sendable {
        let origin = MonotonicInstant.now
        let elapsed = Mutex<Duration>(.zero)
        func advance(_ duration: Duration) { elapsed.withLock { $0 += duration } }
        var now: MonotonicInstant { origin + elapsed.withLock { $0 } }
    }

    static let badDeviceToken = DeliveryReport(
        outcome: .rejected, response: APNsResponse(status: 400, reason: .badDeviceToken), attempts: 1,
        decision: .rejected(removesTarget: true)
    )
    static let unregistered = DeliveryReport(
        outcome: .unregistered, response: APNsResponse(status: 410, reason: .unregistered, timestamp: 1_700_000_000_000), attempts: 1,
        decision: .unregistered(invalidatedAt: 1_700_000_000_000)
    )
    static let delivered = DeliveryReport(outcome: .delivered, response: APNsResponse(status: 200), attempts: 1, decision: .delivered)
    static let noAnswer = DeliveryReport(outcome: .failed, failure: .connectFailed, attempts: 8, decision: .retry(.backoff))

    @Test func withholdsBadDeviceTokenRemovalsInAStormButNeverA410AndLogsEachChangeOnce() {
        let log = LogRecorder()
        let clock = Clock()
        var configuration = TokenRemovalGuard.Configuration()
        configuration.minimumSample = 10
        let screen = TokenRemovalScreen(configuration: configuration, logger: log.logger(), origin: clock.now)
        var tokens = 0
        func allows(_ report: DeliveryReport) -> Bool {
            tokens += 1
            return screen.allowsRemoval(after: report, to: TokenRemovalGuardTests.token(tokens), credential: "acme", environment: .production, at: clock.now)
        }
        #expect((0..<30).map { _ in allows(Self.badDeviceToken) }.allSatisfy { !$0 }, "a storm publishes nothing")
        #expect(allows(Self.unregistered), "410 is authoritative, even while tripped")
        #expect(allows(Self.noAnswer), "no answer: nothing to decide")
        #expect(log.lines(.critical).count == 1, "the critical line fires once: \(log.lines(.critical))")
        #expect(log.lines(.critical).first?.contains("BadDeviceToken") == true)
        #expect(log.lines(.warning).isEmpty)

        clock.advance(.seconds(61))  // the storm leaves the window
        #expect(allows(Self.delivered))
        #expect(log.lines(.warning).count == 1, "the end is logged once")
        for _ in 0..<19 { _ = allows(Self.delivered) }
        #expect(allows(Self.badDeviceToken), "1 of 21 answers: published again")
        #expect(log.lines(.critical).count == 1 && log.lines(.warning).count == 1)
    }

    static let channelNotRegistered = DeliveryReport(
        outcome: .rejected, response: APNsResponse(status: 400, reason: .channelNotRegistered), attempts: 1,
        decision: .rejected(removesTarget: true)
    )

    /// Broadcasts are tallied apart from device pushes: many good device pushes do not vouch for a broadcast
    /// stream where every channel answers ChannelNotRegistered (a wrong environment), and a BadDeviceToken
    /// storm does not withhold a plausible channel removal.
    @Test func channelRemovalsAreScreenedApartFromDeviceTokens() {
        let log = LogRecorder()
        var configuration = TokenRemovalGuard.Configuration()
        configuration.minimumSample = 10
        let screen = TokenRemovalScreen(configuration: configuration, logger: log.logger())
        var targets = 0
        func allows(_ report: DeliveryReport, _ kind: TokenRemovalGuard.Targets) -> Bool {
            targets += 1
            let target = kind == .channels
                ? PushTarget.channel(try! ChannelID(base64: Data("channel \(targets)".utf8).base64EncodedString()))
                : TokenRemovalGuardTests.token(targets)
            return screen.allowsRemoval(after: report, to: target, credential: "acme", environment: .production, at: .now)
        }
        for _ in 0..<100 { _ = allows(Self.delivered, .deviceTokens) }
        #expect((0..<20).map { _ in allows(Self.channelNotRegistered, .channels) }.allSatisfy { !$0 },
                "every broadcast ChannelNotRegistered: withheld, whatever the device pushes did")
        #expect(log.lines(.critical).count == 1)
        #expect(log.lines(.critical).first?.contains("ChannelNotRegistered") == true, "\(log.lines(.critical))")
        #expect(log.lines(.critical).first?.contains("removed-channel") == true, "\(log.lines(.critical))")
        #expect(allows(Self.badDeviceToken, .deviceTokens), "1 of 101 device answers: the device tally is untouched")
    }
}
