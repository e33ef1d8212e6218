import Foundation
import TestSupport

/// Paths in the source checkout (tests only; the relay itself embeds the schemas).
enum Checkout {
    static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The first fenced block of `language` after `heading` in README.md (what a reader copies).
    static func readmeBlock(after heading: String, language: String) throws -> String {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let section = readme.range(of: heading) else { throw TestFailure("README.md has no '\(heading)'") }
        let rest = readme[section.upperBound...]
        guard let open = rest.range(of: "```\(language)\n"), let close = rest[open.upperBound...].range(of: "\n```") else {
            throw TestFailure("no ```\(language) block after '\(heading)' in README.md")
        }
        return String(rest[open.upperBound..<close.lowerBound])
    }

    static func schemaFile(_ name: String) -> URL {
        root.appendingPathComponent("Schemas").appendingPathComponent(name)
    }

    /// The example files of one schema and kind (`valid`, `invalid`, `invalid-beyond-schema`), sorted.
    static func examples(_ schema: String, _ kind: String) -> [(name: String, bytes: [UInt8])] {
        let folder = root.appendingPathComponent("Schemas/examples/\(schema)/\(kind)")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().compactMap { name in
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path) else {
                return nil
            }
            return ("\(schema)/\(kind)/\(name)", [UInt8](data))
        }
    }
}

extension Array where Element == UInt8 {
    /// Printable form for failure messages: ASCII as is, other bytes as \xNN, cut to `limit` bytes.
    func escapedForMessage(limit: Int = 300) -> String {
        var text = ""
        for byte in prefix(limit) {
            if byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                text += "\\x" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return count > limit ? text + "…(\(count) bytes)" : text
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: Swift.max(0, width - count)) + self
    }

    var bytes: [UInt8] { Array(utf8) }
}
