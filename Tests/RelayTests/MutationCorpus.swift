import TestSupport

/// A deterministic corpus of mutated notification events for the differential test.
///
/// Each case starts from a valid event, a device push or a broadcast (random optional members, random
/// whitespace), and applies one or two mutations aimed at the places where two JSON implementations tend to disagree: boundaries of
/// lengths and ranges, number and string grammar, escapes, surrogates, UTF-8, duplicate and escaped keys,
/// nesting depth, size, truncation and random byte damage.
struct MutationCorpus {
    struct Case {
        let label: String
        let bytes: [UInt8]
    }

    private var generator: SeededGenerator
    private typealias Member = (key: String, value: String)

    init(seed: UInt64) { generator = SeededGenerator(seed: seed) }

    mutating func cases(_ count: Int) -> [Case] {
        (0..<count).map { index in next(index) }
    }

    // MARK: Building blocks

    private static let hex = Array("0123456789abcdefABCDEF")
    private static let pushTypes = [
        "alert", "background", "voip", "complication", "fileprovider", "mdm", "location", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]
    private static let wrongValues = [
        "1", "\"x\"", "null", "true", "false", "[]", "{}", "1.5", "-1", "10.0", "1e1", "1E1", "\"10\"", "0", "-0",
        "5", "10", "9999999999", "10000000000", "99999999999999999999", "-9223372036854775808",
        "9223372036854775807", "9223372036854775808", "[\"alert\"]", "{\"a\":1}", "\"\"",
    ]
    private static let numberTokens = [
        "0", "-0", "01", "1.", "-", "0.5", "1e5", "1E+5", "1e-5", ".5", "+1", "1.5e", "0x1", "Infinity", "NaN",
        "1e400", "-1e-400", "123456789012345678901234567890", "1.7976931348623157e308", "00", "-01", "2e", "3.e2",
    ]
    private static let stringBodies = [
        "plain", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\udc00", "\\ud800\\u0041", "\\udbff\\udfff", "\\u12",
        "\\x", "\\/", "\\b\\f\\n\\r\\t", "\\\"", "\\\\", "tab\there", "nul\u{0}", "del\u{7F}", "é😀",
        "\\u0000", "\\uD834\\uDD1E", "\\u", "\\", "a\u{1F}b",
    ]
    private static let atoms = ["true", "false", "null", "tru", "nulll", "True", "fals", "n", "true1"]

    private mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &generator) < percent }
    private mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &generator)] }
    private mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &generator) }

    private mutating func whitespace() -> String {
        chance(70) ? "" : chance(98) ? pick([" ", "\n", "\t", "\r\n", "  "]) : pick(["\u{0C}", "\u{0B}", "\u{A0}"])
    }

    private mutating func hexString(_ length: Int) -> String {
        String((0..<length).map { _ in pick(Self.hex) })
    }

    private mutating func uuid() -> String {
        [8, 4, 4, 4, 12].map { hexString($0) }.joined(separator: "-")
    }

    /// A string of `length` characters, sometimes multi-byte or escaped, to probe character counting.
    private mutating func text(length: Int) -> String {
        let unit = pick(["x", "é", "😀", "\\u00e9", "\\ud83d\\ude00", "\\n"])
        return String(repeating: unit, count: length)
    }

    private static let base64Digits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

    /// Base64 digits with 0 to 2 padding characters, `length` characters in all.
    private mutating func channelID(_ length: Int) -> String {
        let padding = length > 1 ? pick([0, 0, 1, 2]) : 0
        return String((0..<(length - padding)).map { _ in pick(Self.base64Digits) }) + String(repeating: "=", count: padding)
    }

    private mutating func validEvent() -> [Member] {
        let broadcast = chance(35)
        var members: [Member] = [
            ("id", "\"evt-\(int(0...99999))\""),
            broadcast
                ? ("channelId", "\"\(channelID(pick([1, 4, 24, 24, 24, 64, 128])))\"")
                : ("deviceToken", "\"\(hexString(2 * pick([1, 8, 32, 32, 32, 54, 80, 100, 200])))\""),
            ("topic", "\"\(pick(["com.example.app", "com.example.app.voip", "a", "A-b_c.d", "com.example.app.push-type.liveactivity"]))\""),
            ("pushType", "\"\(broadcast ? "liveactivity" : pick(Self.pushTypes))\""),
            ("payload", pick([#"{"aps":{"alert":"hi"}}"#, "{}", #"{"aps":{"content-available":1},"k":[1,2.5,null]}"#])),
        ]
        if chance(50) { members.append(("priority", pick(["10", "5", "1"]))) }
        if chance(50) { members.append(("expiration", pick(["0", "1893456000", "9999999999"]))) }
        if !broadcast, chance(40) { members.append(("collapseId", "\"\(text(length: int(1...64)))\"")) }
        if chance(40) { members.append((broadcast ? "apnsRequestId" : "apnsId", "\"\(uuid())\"")) }
        if chance(40) { members.append(("environment", pick(["\"production\"", "\"development\""]))) }
        if chance(40) { members.append(("metadata", pick(["{}", #"{"user":42,"tags":["a","b"],"n":{"x":null}}"#]))) }
        members.shuffle(using: &generator)
        return members
    }

    private mutating func serialize(_ members: [Member]) -> [UInt8] {
        var text = whitespace() + "{"
        for (index, member) in members.enumerated() {
            if index > 0 { text += whitespace() + "," }
            text += whitespace() + "\"\(member.key)\"" + whitespace() + ":" + whitespace() + member.value
        }
        return Array((text + whitespace() + "}" + whitespace()).utf8)
    }

    /// A random JSON-ish value, mostly valid, with bad tokens mixed in.
    private mutating func junkValue(depth: Int) -> String {
        switch int(0...5) {
        case 0 where depth < 4:
            let items = (0..<int(0...3)).map { _ in junkValue(depth: depth + 1) }
            return "[" + items.joined(separator: pick([",", ", ", ",,", " "])) + "]"
        case 1 where depth < 4:
            let items = (0..<int(0...3)).map { _ in "\"\(pick(Self.stringBodies))\":" + junkValue(depth: depth + 1) }
            return "{" + items.joined(separator: ",") + "}"
        case 2: return pick(Self.numberTokens)
        case 3: return "\"\(pick(Self.stringBodies))\""
        case 4: return pick(Self.atoms)
        default: return chance(80) ? "1" : "\"ok\""
        }
    }

    private mutating func nested(levels: Int) -> String {
        var open = "", close = ""
        for _ in 0..<levels {
            if chance(50) {
                open += "["
                close = "]" + close
            } else {
                open += "{\"a\":"
                close = "}" + close
            }
        }
        return open + pick(["1", "[]", "{}"]) + close
    }

    // MARK: Mutations

    private mutating func next(_ index: Int) -> Case {
        var members = validEvent()
        var labels: [String] = []
        let mutations = chance(30) ? 2 : 1
        var bytes: [UInt8]? = nil
        for _ in 0..<mutations {
            let key = members.isEmpty ? "id" : pick(members).key
            switch int(0...24) {
            case 0:
                labels.append("drop \(key)")
                members.removeAll { $0.key == key }
            case 1:
                labels.append("duplicate \(key)")
                if let member = members.first(where: { $0.key == key }) {
                    members.insert((key, chance(50) ? member.value : pick(Self.wrongValues)), at: int(0...members.count))
                }
            case 2, 3:
                let value = pick(Self.wrongValues)
                labels.append("retype \(key)=\(value)")
                members = members.map { $0.key == key ? (key, value) : $0 }
            case 4, 5:
                let length = pick([0, 1, 2, 3, 63, 64, 65, 399, 400, 401, 402, int(0...450)])
                var token = hexString(length)
                if chance(30), !token.isEmpty { token.removeLast(); token.append(pick(["g", "G", " ", "-", ":", "\\n"])) }
                labels.append("token length \(length)")
                members = members.filter { $0.key != "deviceToken" } + [("deviceToken", "\"\(token)\"")]
            case 6, 7:
                let field = pick(["id", "collapseId", "topic"])
                let length = pick([0, 1, 63, 64, 65, 254, 255, 256, 257, int(0...300)])
                let value = field == "topic"
                    ? String(repeating: pick(["a", ".", "-", "_", "é", " "]), count: length)
                    : text(length: length)
                labels.append("\(field) length \(length)")
                members = members.filter { $0.key != field } + [(field, "\"\(value)\"")]
            case 8:
                let field = pick(["priority", "expiration"])
                let value = pick(Self.numberTokens + Self.wrongValues + ["-1", "4", "6", "11", "1"])
                labels.append("\(field)=\(value)")
                members = members.filter { $0.key != field } + [(field, value)]
            case 9:
                var id = uuid()
                if chance(70) {
                    var characters = Array(id)
                    characters[int(0...(characters.count - 1))] = pick(["g", "-", "A", "0", "_"])
                    if chance(30) { characters.removeLast() }
                    if chance(20) { characters.append("0") }
                    id = String(characters)
                }
                labels.append("apnsId \(id)")
                members = members.filter { $0.key != "apnsId" } + [("apnsId", "\"\(id)\"")]
            case 10:
                let field = pick(["pushType", "environment"])
                let value = pick(Self.pushTypes + ["production", "development", "Alert", "PRODUCTION", "sandbox", "", "alert "])
                labels.append("\(field)=\(value)")
                members = members.filter { $0.key != field } + [(field, "\"\(value)\"")]
            case 11:
                let name = pick(["badge", "devicetoken", "Id", "payload ", "", "\\u0000", "metadata2"])
                labels.append("unknown key \(name)")
                members.insert((name, junkValue(depth: 0)), at: int(0...members.count))
            case 12:
                // Escaped spellings of known keys are the same key to every JSON parser.
                let replacements = ["id": "\\u0069d", "topic": "t\\u006fpic", "payload": "p\\u0061yload", "priority": "\\u0070riority"]
                let escaped = replacements[key] ?? key
                labels.append("escaped key \(escaped)")
                members = members.map { $0.key == key ? (escaped, $0.value) : $0 }
            case 13:
                let levels = pick([60, 61, 62, 63, 64, 65, 66, int(1...200)])
                let field = pick(["payload", "metadata"])
                labels.append("\(field) nesting \(levels)")
                members = members.filter { $0.key != field } + [(field, "{\"deep\":" + nested(levels: levels) + "}")]
            case 14, 15:
                let field = pick(["payload", "metadata"])
                let value = "{\"j\":" + junkValue(depth: 0) + (chance(30) ? ",\"k\":" + junkValue(depth: 1) : "") + "}"
                labels.append("\(field) junk")
                members = members.filter { $0.key != field } + [(field, value)]
            case 16:
                labels.append("string escapes in \(pick(["id", "topic"]))")
                let field = pick(["id", "topic", "collapseId"])
                members = members.filter { $0.key != field } + [(field, "\"\(pick(Self.stringBodies))\"")]
            case 18, 19:
                // The channel id's grammar: lengths around the limit, foreign characters, misplaced padding.
                let length = pick([0, 1, 2, 4, 24, 127, 128, 129, int(0...140)])
                var id = channelID(length)
                if chance(40), !id.isEmpty {
                    var characters: [String] = id.map { String($0) }
                    characters[int(0...(characters.count - 1))] = pick(["=", "-", "_", " ", "é", "\\n", "A"])
                    id = characters.joined()
                }
                labels.append("channelId \(id.prefix(20))… length \(length)")
                members = members.filter { $0.key != "channelId" } + [("channelId", "\"\(id)\"")]
            case 20:
                // A member of the other form: a device push with a broadcast's member, or the reverse.
                let field = pick(["channelId", "deviceToken", "apnsRequestId", "apnsId", "collapseId"])
                let value = switch field {
                case "channelId": "\"\(channelID(24))\""
                case "deviceToken": "\"\(hexString(64))\""
                case "collapseId": "\"score\""
                default: "\"\(uuid())\""
                }
                labels.append("add \(field)")
                members = members.filter { $0.key != field } + [(field, value)]
            case 17:
                let size = pick([65_400, 65_536, 65_600, int(60_000...70_000)])
                labels.append("size about \(size)")
                let filler = String(repeating: "x", count: size)
                members = members.filter { $0.key != "metadata" } + [("metadata", "{\"f\":\"\(filler)\"}")]
            default:
                var raw = bytes ?? serialize(members)
                switch int(0...5) {
                case 0:
                    let cut = int(0...raw.count)
                    labels.append("truncate at \(cut)")
                    raw = Array(raw.prefix(cut))
                case 1:
                    let flips = int(1...3)
                    labels.append("flip \(flips) bytes")
                    for _ in 0..<flips where !raw.isEmpty {
                        let at = int(0...(raw.count - 1))
                        raw[at] = chance(50) ? UInt8(int(0...255)) : pick(Array("{}[]\",:\\ 0e-.".utf8))
                    }
                case 2:
                    labels.append("invalid UTF-8")
                    let bad: [[UInt8]] = [[0xFF], [0xC3], [0xC3, 0x28], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC0, 0xAF]]
                    raw.insert(contentsOf: pick(bad), at: int(0...raw.count))
                case 3:
                    let tail = pick([" x", "}", "]", ",", "{}", "\n", " \t\r\n", "\u{0}", "null", "\u{0C}", "\u{0B}", "\u{A0}", "\u{FEFF}"])
                    labels.append("trailing \(tail.debugDescription)")
                    raw += Array(tail.utf8)
                case 4:
                    labels.append("byte order mark")
                    raw = [0xEF, 0xBB, 0xBF] + raw
                default:
                    labels.append("wrap")
                    raw = Array(pick(["[", "{\"e\":", " "]).utf8) + raw + Array(pick(["]", "}", " "]).utf8)
                }
                bytes = raw
            }
        }
        return Case(label: "#\(index) " + labels.joined(separator: ", "), bytes: bytes ?? serialize(members))
    }
}
