import ArgumentParser
import Foundation
import Relay

/// `apns-relay validate`: checks event files against `Schemas/notification-event.schema.json` (and the
/// APNs rules the relay applies after it), with the same validator the relay uses to explain rejections.
struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check notification event files (JSON, or JSON lines with --lines) against the event schema.",
        discussion: "Exit status: 0 all valid, 1 some invalid, 2 some file could not be read."
    )

    @Argument(help: "Event files; '-' reads standard input.")
    var files: [String]

    @Flag(help: "Each line of a file is one event.")
    var lines = false

    func run() throws {
        let schema = try SchemaValidator.notificationEvent()
        let decoder = try EventDecoder(explainer: schema)
        var failures = 0
        var checked = 0
        var unreadable = 0
        for file in files {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                switch Self.read(file) {
                case .success(let contents):
                    data = contents
                case .failure(let reason):
                    unreadable += 1
                    print("\(file): cannot read: \(reason.reason)")
                    continue
                }
            }
            let events: [(String, [UInt8])]
            if lines {
                events = data.split(separator: UInt8(ascii: "\n")).enumerated().compactMap { index, line in
                    line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) ? nil : ("\(file):\(index + 1)", Array(line))
                }
            } else {
                events = [(file, Array(data))]
            }
            for (name, bytes) in events {
                checked += 1
                do {
                    let event = try decoder.decode(bytes)
                    try event.notification.validate()
                    print("\(name): ok")
                } catch let error as EventDecodingError {
                    failures += 1
                    print("\(name): invalid: \(error)")
                } catch {
                    failures += 1
                    print("\(name): invalid: \(error)")
                }
            }
        }
        print("\(checked - failures) valid, \(failures) invalid" + (unreadable > 0 ? ", \(unreadable) unreadable" : ""))
        if unreadable > 0 { throw ExitCode(2) }
        if failures > 0 { throw ExitCode(1) }
    }

    struct Unreadable: Error { let reason: String }

    /// The file's bytes, or why it cannot be read (the operating system's reason).
    private static func read(_ path: String) -> Result<Data, Unreadable> {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return .failure(Unreadable(reason: "no such file")) }
        if isDirectory.boolValue { return .failure(Unreadable(reason: "it is a directory")) }
        let descriptor = open(path, O_RDONLY)
        if descriptor < 0 { return .failure(Unreadable(reason: String(cString: strerror(errno)))) }
        close(descriptor)
        guard let data = FileManager.default.contents(atPath: path) else { return .failure(Unreadable(reason: "read failed")) }
        return .success(data)
    }
}
