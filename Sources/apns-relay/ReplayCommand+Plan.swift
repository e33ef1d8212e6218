import Kafka
import RelayContract

extension ReplayCommand {
    /// Where a dead letter is in the dead-letter topic.
    struct Position: Hashable {
        var partition: Int32
        var offset: Int64

        init(_ message: KafkaConsumerMessage) {
            partition = message.partition
            offset = message.offset
        }
    }

    /// What the replay does with one dead letter.
    enum Decision: Equatable {
        /// Not asked for (`--reason`, `--stage`, `--since`, `--until`).
        case filteredOut
        /// Asked for, but not the event as it was sent (cut to fit), or with nowhere to go.
        case notReplayable(String)
        /// Asked for, but its headers cannot be trusted or it names a topic this relay does not read.
        case refused(String)
        case replay(to: String)
    }

    /// The filters and the topics a replay may write to: what decides each dead letter's fate.
    struct Rules {
        var reasons: [String]
        var stages: [String]
        var since: Int64?
        var until: Int64?
        /// `--to-topic`, already checked to be one of `inputs`.
        var toTopic: String?
        /// The relay's input topics (`kafka.topics.input` + `kafka.topics.urgent`): the only targets.
        var inputs: [String]

        func decide(_ letter: DeadLetterHeaders, timestamp: Int64?) -> Decision {
            let code = letter.errorCode ?? "?"
            if !reasons.isEmpty && !reasons.contains(code) { return .filteredOut }
            if !stages.isEmpty && !stages.contains(letter.stage ?? "?") { return .filteredOut }
            let time = timestamp ?? 0
            if let since, time < since { return .filteredOut }
            if let until, time >= until { return .filteredOut }
            // Only a dead letter written before original headers were renamed can repeat a relay name: the
            // producer's copy came first and the relay's block last. The record itself cannot prove which is
            // which (a producer could have sent both copies), so it is refused rather than replayed on the
            // strength of the last block.
            if !letter.repeatedNames.isEmpty {
                return .refused(
                    "more than one \(letter.repeatedNames.joined(separator: ", ")) header: the event's own headers pose as "
                        + "the relay's (a dead letter written before original headers were kept under __original.)")
            }
            // A cut value, a replaced key or dropped headers would not be the event the producer sent.
            if letter.wasCut { return .notReplayable("cut to fit the dead-letter topic; not replayable as it was") }
            guard let target = toTopic ?? letter.topic else {
                return .notReplayable("no \(DeadLetter.Header.topic) header and no --to-topic")
            }
            guard inputs.contains(target) else {
                return .refused(
                    "\(target) is not an input topic of this relay (\(Self.describe(inputs)); if the input topics were renamed "
                        + "since, give --to-topic)")
            }
            return .replay(to: target)
        }

        /// `kafka.topics.input and kafka.topics.urgent: a, b`.
        static func describe(_ inputs: [String]) -> String {
            "kafka.topics.input and kafka.topics.urgent: \(inputs.isEmpty ? "none" : inputs.joined(separator: ", "))"
        }
    }

    /// What the first read found: the counts, and every dead letter to write with its target. The second read
    /// writes exactly these, so what is written is what was shown, however the topic changed in between.
    struct Plan {
        var matched = 0
        var notReplayable = 0
        var refused = 0
        var targets: [Position: String] = [:]
        var byTarget: [String: Int] = [:]
        var byReason: [String: Int] = [:]
        /// The `would replay` lines printed so far (a long plan lists the first `listed` only).
        private var listedReplays = 0
        static let listed = 100

        /// Adds one dead letter; returns the line that says what happens to it, if one is printed.
        mutating func add(_ message: KafkaConsumerMessage, rules: Rules) -> String? {
            let letter = DeadLetterHeaders(message.headers.map { RecordHeader(name: $0.name, value: $0.value) })
            let decision = rules.decide(letter, timestamp: message.timestampMilliseconds)
            let code = letter.errorCode ?? "?"
            switch decision {
            case .filteredOut:
                return nil
            case .notReplayable(let why):
                matched += 1
                notReplayable += 1
                return "  skip \(Self.describe(message, letter)) \(code): \(why)"
            case .refused(let why):
                matched += 1
                refused += 1
                return "  refuse \(Self.describe(message, letter)) \(code): \(why); not replayed"
            case .replay(let target):
                matched += 1
                targets[Position(message)] = target
                byTarget[target, default: 0] += 1
                byReason["\(letter.stage ?? "?")/\(code)", default: 0] += 1
                listedReplays += 1
                if listedReplays > Self.listed { return nil }
                return "  would replay \(letter.position) \(code) → \(target)"
            }
        }

        /// The dead letter's own place, and the event's as its headers say (they may be forged).
        private static func describe(_ message: KafkaConsumerMessage, _ letter: DeadLetterHeaders) -> String {
            "\(message.topic)[\(message.partition)]@\(message.offset) (from \(letter.position))"
        }

        /// Per partition, the offset after the last dead letter to write: where the second read may stop.
        var ends: [Int32: Int64] {
            targets.keys.reduce(into: [:]) { ends, position in
                ends[position.partition] = max(ends[position.partition] ?? 0, position.offset + 1)
            }
        }

        var unlisted: Int { max(0, listedReplays - Self.listed) }

        /// `N matched, M would be replayed, …` and the counts per stage and reason; once written, `M replayed, …`
        /// alone.
        func summary(replayed: Int? = nil, failed: Int = 0, missing: Int = 0) -> String {
            let written = replayed.map { "\($0) replayed" } ?? "\(targets.count) would be replayed"
            var line =
                "\(matched) matched, \(written), \(notReplayable) not replayable (cut to fit), \(refused) refused"
            if failed > 0 { line += ", \(failed) failed to produce" }
            if missing > 0 { line += ", \(missing) no longer found" }
            if replayed == nil && !byReason.isEmpty {
                line +=
                    "\n"
                    + byReason.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value)" }.joined(separator: "\n")
            }
            return line
        }
    }
}
