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
                throw RelayError("configuration file '\(path)' is not valid JSON: \(error)")
            }
        } else {
            let node: Node?
            do {
                node = try Yams.compose(yaml: String(decoding: data, as: UTF8.self))
            } catch {
                throw RelayError("configuration file '\(path)' is not valid YAML: \(error)")
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
