import Foundation
import RelayApp

/// `configuration`: one input is a file, environment variables and `--set` items, read as `apns-relay run` and
/// `check` read them (`RelayAppConfiguration.reader`, `RelayAppConfiguration(reader:)`, `effectiveSettings`).
///
/// Input format (text, so that corpus files can be written by hand), three sections split by the byte 0x1E
/// (ASCII record separator), missing sections empty:
///
///     <kind><file text> 0x1E <NAME=value lines> 0x1E <key=value lines>
///
/// `kind` is the first byte: `J` a `.json` file, `N` no file, anything else a `.yaml` file (the byte is part of
/// the YAML then, so YAML seeds need no prefix). Environment lines are passed as given, prefix included
/// (`APNS_RELAY_KAFKA_GROUP_ID=a`), so that unprefixed and tooling variables are exercised too; a line splits at
/// its first `=`. `--set` lines are split as the command line splits them (`ConfigurationOptions.settings`: at
/// the first `=`, which may not be the first character; the command refuses any other item, so it is skipped).
enum ConfigurationTarget {
    struct Input {
        enum FileKind { case yaml, json }

        var file: (kind: FileKind, text: [UInt8])?
        var environment: [String: String] = [:]
        var overrides: [String: String] = [:]
    }

    static let separator: UInt8 = 0x1E

    static func input(_ bytes: [UInt8]) -> Input {
        let sections = bytes.split(separator: separator, maxSplits: 2, omittingEmptySubsequences: false)
        var input = Input()
        let fileSection = sections[0]
        switch fileSection.first {
        case UInt8(ascii: "N"): input.file = nil
        case UInt8(ascii: "J"): input.file = (.json, Array(fileSection.dropFirst()))
        default: input.file = (.yaml, Array(fileSection))
        }
        if sections.count > 1 {
            for line in lines(sections[1]) {
                guard let equals = line.firstIndex(of: "=") else { continue }
                input.environment[String(line[..<equals])] = String(line[line.index(after: equals)...])
            }
        }
        if sections.count > 2 {
            for item in lines(sections[2]) {
                guard let equals = item.firstIndex(of: "="), equals != item.startIndex else { continue }
                input.overrides[String(item[..<equals])] = String(item[item.index(after: equals)...])
            }
        }
        return input
    }

    private static func lines(_ section: ArraySlice<UInt8>) -> [String] {
        section.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
    }

    static func run(_ bytes: [UInt8]) async {
        let input = input(bytes)
        // A file per input, named for it: the replay runs targets concurrently with other tests.
        var path: String?
        if let file = input.file {
            let name = "apns-relay-fuzz-\(UUID().uuidString).\(file.kind == .json ? "json" : "yaml")"
            let url = FileManager.default.temporaryDirectory.appendingPathComponent(name)
            do {
                try Data(file.text).write(to: url)
            } catch {
                preconditionFailure("cannot write the configuration file \(url.path): \(error)")
            }
            path = url.path
        }
        defer { if let path { try? FileManager.default.removeItem(atPath: path) } }
        // Errors are the loader's answers to bad input; only a crash (or a hang) is a finding.
        guard let sources = try? await RelayAppConfiguration.reader(file: path, environment: input.environment, overrides: input.overrides)
        else { return }
        for (requireKafka, requireCredential) in [(true, true), (false, false)] {
            guard let configuration = try? RelayAppConfiguration(reader: sources, requireKafka: requireKafka, requireCredential: requireCredential)
            else { continue }
            _ = configuration.effectiveSettings(from: sources)
        }
    }
}
