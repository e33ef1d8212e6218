import Foundation
import Relay
import Yams

/// What a configuration file holds, key by key, with each value's type as written.
///
/// swift-configuration reads the values; this inventory exists because its providers can neither list the
/// keys a file holds (so a misspelt key would be ignored) nor say that `bootstrapServers: 1` is a number
/// (so a wrong type would read as "missing"). Mappings are listed too, under their own path, so that a
/// mapping where a single value belongs is reported as such rather than as a set of unknown keys.
package struct ConfigurationFile: Sendable {
    /// A value as the file wrote it.
    package enum Value: Sendable, Equatable {
        case string(String)
        case integer(Int)
        case number(Double)
        case bool(Bool)
        case null
        case list([Value])
        case mapping

        /// How a message names this value: "the number 1", "the string 'x'", "a list", ….
        package var description: String {
            switch self {
            case .string(let text): "the string '\(text)'"
            case .integer(let number): "the number \(number)"
            case .number(let number): "the number \(number)"
            case .bool(let flag): "\(flag)"
            case .null: "null (no value)"
            case .list: "a list"
            case .mapping: "a mapping"
            }
        }
    }

    package let path: String
    /// Dotted key → value; a mapping's own path maps to `.mapping`.
    package let values: [String: Value]

    /// Reads and parses `path` (`.json` as JSON, anything else as YAML).
    /// - Throws: `RelayError` naming the file when it cannot be read or parsed.
    package init(path: String) throws {
        self.path = path
        guard let data = FileManager.default.contents(atPath: path) else {
            throw RelayError("configuration file '\(path)' does not exist or cannot be read")
        }
        var values: [String: Value] = [:]
        if path.hasSuffix(".json") {
            do {
                let decoded = try JSONDecoder().decode(JSONValue.self, from: data)
                guard case .object(let members) = decoded else {
                    throw RelayError("configuration file '\(path)' is not a JSON object")
                }
                Self.flatten(json: members, prefix: "", into: &values)
            } catch let error as RelayError {
                throw error
            } catch {
                throw RelayError("configuration file '\(path)' is not valid JSON: \(Self.jsonProblem(error, data: data))")
            }
        } else {
            let node: Node?
            do {
                node = try Yams.compose(yaml: String(decoding: data, as: UTF8.self))
            } catch {
                throw RelayError("configuration file '\(path)' is not valid YAML: \(Self.yamlProblem(error))")
            }
            guard let node else {  // an empty file: every key takes its default
                self.values = [:]
                return
            }
            guard let mapping = node.mapping else {
                throw RelayError("configuration file '\(path)' is not a YAML mapping (key: value lines)")
            }
            try Self.flatten(yaml: mapping, prefix: "", path: path, into: &values)
        }
        self.values = values
    }

    // A parse error names the place and the kind of problem, never the text there: Yams and Foundation quote
    // the offending line, and that line may be a password pasted into `kafka.properties`.

    /// A YAML parse error as "line:column: what" (libyaml's problem texts are fixed phrases).
    package static func yamlProblem(_ error: any Error) -> String {
        guard let error = error as? YamlError else { return "it cannot be parsed" }
        func at(_ mark: Mark, _ problem: String, _ context: YamlError.Context?) -> String {
            let within = context.map { " (\($0.text) from \($0.mark.line):\($0.mark.column))" } ?? ""
            return "\(mark.line):\(mark.column): \(problem)\(within)"
        }
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            return at(mark, problem, context)
        case .reader(let problem, let offset, _, let yaml):
            guard let offset, offset <= yaml.utf8.count else { return problem }
            let before = yaml.utf8.prefix(offset)
            let line = before.filter { $0 == UInt8(ascii: "\n") }.count + 1
            let column = before.reversed().prefix { $0 != UInt8(ascii: "\n") }.count + 1
            return "\(line):\(column): \(problem)"
        case .duplicatedKeysInMapping(_, let context):
            return "\(context.mark.line):\(context.mark.column): a key appears twice in one mapping"
        case .dataCouldNotBeDecoded: return "it is not UTF-8 text"
        case .memory: return "out of memory"
        default: return "it cannot be parsed"
        }
    }

    /// A JSON parse error as "line:column: what". Foundation's error says neither where nor what (and
    /// might quote the text in another version), so the place is found by scanning the file again.
    static func jsonProblem(_ error: any Error, data: Data? = nil) -> String {
        guard let data, let problem = JSONSyntaxProblem.first(in: Array(data)) else { return "it cannot be parsed" }
        return "\(problem.line):\(problem.column): \(problem.kind)"
    }

    private static func flatten(yaml mapping: Node.Mapping, prefix: String, path: String, into values: inout [String: Value]) throws {
        for (keyNode, node) in mapping {
            guard let name = keyNode.scalar?.string else {
                throw RelayError("configuration file '\(path)' has a key under '\(prefix)' that is not text")
            }
            let key = prefix + name
            if let nested = node.mapping {
                values[key] = .mapping
                try flatten(yaml: nested, prefix: key + ".", path: path, into: &values)
            } else {
                values[key] = value(yaml: node)
            }
        }
    }

    private static func value(yaml node: Node) -> Value {
        if let sequence = node.sequence { return .list(sequence.map(value(yaml:))) }
        if node.mapping != nil { return .mapping }
        guard let scalar = node.scalar else { return .null }
        let text = scalar.string
        // The tag is the YAML resolver's reading of a plain scalar; a quoted one is always a string.
        switch node.tag.rawValue {
        case Tag.Name.int.rawValue: return Int.construct(from: scalar).map(Value.integer) ?? .string(text)
        case Tag.Name.float.rawValue: return Double.construct(from: scalar).map(Value.number) ?? .string(text)
        case Tag.Name.bool.rawValue: return Bool.construct(from: scalar).map(Value.bool) ?? .string(text)
        case Tag.Name.null.rawValue: return .null
        default: return .string(text)
        }
    }

    private static func flatten(json members: [String: JSONValue], prefix: String, into values: inout [String: Value]) {
        for (name, member) in members {
            let key = prefix + name
            if case .object(let nested) = member {
                values[key] = .mapping
                flatten(json: nested, prefix: key + ".", into: &values)
            } else {
                values[key] = member.value
            }
        }
    }
}

/// JSON as written: booleans stay apart from numbers (JSONSerialization blurs them on Linux).
private enum JSONValue: Decodable {
    case string(String), integer(Int), number(Double), bool(Bool), null, array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Int.self) {
            self = .integer(number)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    var value: ConfigurationFile.Value {
        switch self {
        case .string(let text): .string(text)
        case .integer(let number): .integer(number)
        case .number(let number): .number(number)
        case .bool(let flag): .bool(flag)
        case .null: .null
        case .array(let items): .list(items.map(\.value))
        case .object: .mapping
        }
    }
}

/// The first place where a text stops being JSON (RFC 8259), and what is wrong there: the line, the column (in
/// characters) and a kind, never the text itself.
struct JSONSyntaxProblem: Equatable {
    var line: Int
    var column: Int
    var kind: String

    static func first(in bytes: [UInt8]) -> JSONSyntaxProblem? {
        var scanner = Scanner(bytes: bytes)
        do throws(Scanner.Failure) {
            scanner.skipWhitespace()
            try scanner.value(depth: 0)
            scanner.skipWhitespace()
            if scanner.offset < bytes.count { throw Scanner.Failure(offset: scanner.offset, kind: "more text after the top-level value") }
            return nil
        } catch {
            let before = bytes.prefix(error.offset)
            let line = before.count(where: { $0 == UInt8(ascii: "\n") }) + 1
            let column = before.reversed().prefix { $0 != UInt8(ascii: "\n") }.count(where: { $0 & 0xC0 != 0x80 }) + 1
            return JSONSyntaxProblem(line: line, column: column, kind: error.kind)
        }
    }

    private struct Scanner {
        struct Failure: Error { var offset: Int; var kind: String }
        let bytes: [UInt8]
        var offset = 0

        private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

        private func fail(_ kind: String) -> Failure {
            Failure(offset: offset, kind: offset < bytes.count ? kind : "the file ends in the middle of a value")
        }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1 }
        }

        mutating func value(depth: Int) throws(Failure) {
            guard depth < 512 else { throw fail("nested more than 512 levels deep") }
            guard let byte = current else { throw fail("a missing value") }
            switch byte {
            case UInt8(ascii: "{"): try container(close: UInt8(ascii: "}"), depth: depth, keyed: true)
            case UInt8(ascii: "["): try container(close: UInt8(ascii: "]"), depth: depth, keyed: false)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default:
                for word in ["true", "false", "null"] where bytes[offset...].starts(with: word.utf8) {
                    offset += word.utf8.count
                    return
                }
                throw fail("an unexpected character where a value belongs (text without quotes?)")
            }
        }

        private mutating func container(close: UInt8, depth: Int, keyed: Bool) throws(Failure) {
            offset += 1
            skipWhitespace()
            if current == close { offset += 1; return }
            while true {
                if keyed {
                    guard current == UInt8(ascii: "\"") else { throw fail("an unexpected character where a quoted key belongs") }
                    try string()
                    skipWhitespace()
                    guard current == UInt8(ascii: ":") else { throw fail("a missing ':' after a key") }
                    offset += 1
                    skipWhitespace()
                }
                try value(depth: depth + 1)
                skipWhitespace()
                if current == close { offset += 1; return }
                guard current == UInt8(ascii: ",") else {
                    throw fail(keyed ? "a missing ',' or '}' after a value" : "a missing ',' or ']' after a value")
                }
                offset += 1
                skipWhitespace()
            }
        }

        private mutating func string() throws(Failure) {
            offset += 1
            while let byte = current {
                switch byte {
                case UInt8(ascii: "\""):
                    offset += 1
                    return
                case UInt8(ascii: "\\"):
                    offset += 1
                    guard let escaped = current else { break }
                    if escaped == UInt8(ascii: "u") {
                        let hex = bytes[(offset + 1)...].prefix(4)
                        guard hex.count == 4, hex.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }) else {
                            throw fail("an invalid \\u escape inside a string")
                        }
                        offset += 5
                    } else {
                        guard Array("\"\\/bfnrt".utf8).contains(escaped) else { throw fail("an invalid escape sequence inside a string") }
                        offset += 1
                    }
                case 0x00..<0x20:
                    throw fail("a control character (a line break?) inside a string")
                default:
                    offset += 1
                }
            }
            throw Failure(offset: offset, kind: "the file ends inside a string")
        }

        private mutating func number() throws(Failure) {
            func digits() -> Int {
                let start = offset
                while let byte = current, byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") { offset += 1 }
                return offset - start
            }
            if current == UInt8(ascii: "-") { offset += 1 }
            if current == UInt8(ascii: "0") {
                offset += 1
            } else if digits() == 0 {
                throw fail("an invalid number")
            }
            if current == UInt8(ascii: ".") {
                offset += 1
                guard digits() > 0 else { throw fail("an invalid number (no digit after the point)") }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                offset += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
                guard digits() > 0 else { throw fail("an invalid number (no digit in the exponent)") }
            }
        }
    }
}
