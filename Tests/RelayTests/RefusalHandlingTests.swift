import Dispatch
import Foundation
import Kafka
import RelayContract
import ServiceSupport
import TestSupport
import Testing

@testable import Relay

/// A refused event's log line: a few per reason and interval, the rest counted into the next line.
@Suite struct RefusalLogBudgetTests {
    private static let second: Int64 = 1_000_000_000

    @Test func logsTheFirstLinesOfAnIntervalAndCountsTheRestIntoTheNextLine() {
        var budget = RefusalLogBudget(linesPerInterval: 3, interval: .seconds(10))
        let t0: Int64 = 1_700_000_000 * Self.second
        let first = (0..<3).map { budget.admit("schema_violation", nowNanoseconds: t0 + Int64($0)) }
        #expect(first == [.log(suppressed: 0), .log(suppressed: 0), .log(suppressed: 0)])
        let flood = (0..<1_000).map { budget.admit("schema_violation", nowNanoseconds: t0 + 5 * Self.second + Int64($0)) }
        #expect(flood.allSatisfy { $0 == .suppress }, "past 3 lines in the interval every line is left out")
        // The next interval: its first line says how many were left out, the next ones nothing.
        #expect(budget.admit("schema_violation", nowNanoseconds: t0 + 10 * Self.second) == .log(suppressed: 1_000))
        #expect(budget.admit("schema_violation", nowNanoseconds: t0 + 10 * Self.second + 1) == .log(suppressed: 0))
    }

    @Test func eachReasonHasItsOwnBudget() {
        var budget = RefusalLogBudget(linesPerInterval: 1, interval: .seconds(1))
        #expect(budget.admit("a", nowNanoseconds: 0) == .log(suppressed: 0))
        #expect(budget.admit("a", nowNanoseconds: 1) == .suppress)
        #expect(budget.admit("b", nowNanoseconds: 2) == .log(suppressed: 0), "a flood of one reason leaves the others logged")
        #expect(budget.admit("a", nowNanoseconds: Self.second) == .log(suppressed: 1))
    }

    @Test func aClockThatGoesBackStartsTheIntervalOver() {
        var budget = RefusalLogBudget(linesPerInterval: 1, interval: .seconds(10))
        #expect(budget.admit("a", nowNanoseconds: 100 * Self.second) == .log(suppressed: 0))
        #expect(budget.admit("a", nowNanoseconds: 101 * Self.second) == .suppress)
        #expect(budget.admit("a", nowNanoseconds: 50 * Self.second) == .log(suppressed: 1))
    }

    @Test func reasonsPastTheTableShareOneBudget() {
        var budget = RefusalLogBudget(linesPerInterval: 1, interval: .seconds(10))
        for n in 0..<RefusalLogBudget.maxReasons {
            #expect(budget.admit("r\(n)", nowNanoseconds: 0) == .log(suppressed: 0))
        }
        #expect(budget.admit("new-1", nowNanoseconds: 0) == .log(suppressed: 0))
        #expect(budget.admit("new-2", nowNanoseconds: 0) == .suppress, "one budget for every reason past the table")
    }
}

/// Schema-invalid events are echoed and explained off the consumer loop within a bounded backlog.
@Suite struct RefusalExplanationsTests {
    private func refused(_ json: [UInt8]) throws -> (DeliveryResult, Refusal) {
        var triage = EventTriage(
            configuration: RelayConfiguration(topics: .init(input: ["in"], results: "results", removedTokens: "removed", deadLetters: "dead")),
            decoder: try EventDecoder(), credentials: CredentialDirectory([]))
        triage.defersSalvage = true
        let message = KafkaConsumerMessage(topic: "in", partition: 0, offset: 1, key: nil, value: json)
        guard case .answer(let result, let refusal?, _) = triage.triage(InFlightEvent(message, receivedAt: 0), nowSeconds: 0) else {
            throw TestFailure("the event was not refused with a dead letter")
        }
        return (result, refusal)
    }

    /// Both problems named: the reference validator's account (the fast decoder stops at its first).
    private static func explainsBoth(_ message: String?) -> Bool {
        message.map { $0.contains("/deviceToken") && $0.contains("/pushType") } ?? false
    }

    /// Two problems: a device token that is not hex, a push type that is none of the allowed ones.
    private static func invalid(id: String, padding: Int = 0) -> [UInt8] {
        Array(#"{"id":"\#(id)","deviceToken":"zz","topic":"t","pushType":"Alert","payload":{},"metadata":{"pad":"\#(String(repeating: "p", count: padding))"}}"#.utf8)
    }

    /// The consumer loop's triage leaves the echo to the explanation; the explanation echoes and explains.
    @Test func theLoopDefersTheEchoAndTheExplanationDoesIt() throws {
        let (result, refusal) = try refused(Self.invalid(id: "e1"))
        #expect(result.eventID == nil && refusal.salvagePending, "the loop parsed nothing more than the fast decoder")
        let (explained, done) = EventTriage.explained(result, refusal, bytes: Self.invalid(id: "e1")[...], by: try SchemaValidator.notificationEvent())
        #expect(explained.eventID == "e1" && !done.salvagePending)
        #expect(explained.metadata.map { String(decoding: $0, as: UTF8.self) } == #"{"pad":""}"#)
        #expect(Self.explainsBoth(explained.message), "\(explained.message ?? "")")
        #expect(!Self.explainsBoth(result.message), "the control: the fast decoder names one: \(result.message ?? "")")
    }

    /// Past `maxBacklog` waiting events `submit` refuses at once (the caller answers with the fast decoder's
    /// message); every event queued is answered once; events over `maxExplainedBytes` are echoed, not explained.
    @Test func aFullBacklogAnswersAtOnceAndEveryQueuedEventIsAnsweredOnce() async throws {
        let queue = DispatchQueue(label: "test.explanations")
        let explanations = RefusalExplanations(
            validator: try SchemaValidator.notificationEvent(), maxBacklog: 3, maxExplainedBytes: 1_000, queue: queue)
        let answers = BlockingMutex<[(String?, String?, RefusalExplanations.Shortcut)]>([])
        queue.suspend()
        var accepted: [Bool] = []
        for n in 0..<5 {
            let event = Self.invalid(id: "e\(n)", padding: n == 2 ? 2_000 : 0)
            let (result, refusal) = try refused(event)
            accepted.append(explanations.submit(result, refusal, bytes: event[...]) { result, _, shortcut in
                answers.withLock { $0.append((result.eventID, result.message, shortcut)) }
            })
        }
        #expect(accepted == [true, true, true, false, false], "three wait; the fourth and fifth are answered at once")
        #expect(explanations.backlog == 3)
        queue.resume()
        try await eventually("the three queued events are answered", within: .seconds(60)) { answers.withLock { $0.count } == 3 }
        let got = answers.withLock { $0 }
        #expect(got.map(\.0) == ["e0", "e1", "e2"], "each echoed once, in order")
        #expect(got.map(\.2) == [.none, .none, .tooLarge])
        #expect(Self.explainsBoth(got[0].1) && Self.explainsBoth(got[1].1), "\(got.map(\.1))")
        #expect(!Self.explainsBoth(got[2].1), "the large one keeps the fast decoder's message: \(got[2].1 ?? "")")
        #expect(explanations.backlog == 0)
        // With room again, events are queued.
        let (result, refusal) = try refused(Self.invalid(id: "late"))
        #expect(explanations.submit(result, refusal, bytes: Self.invalid(id: "late")[...]) { _, _, _ in })
    }
}
