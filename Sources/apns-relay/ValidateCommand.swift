import ArgumentParser
import Foundation
import Relay

/// `apns-relay validate`: checks event files against `Schemas/notification-event.schema.json` (and the
/// APNs rules the relay applies after it), with the same validator the relay uses to explain rejections.
struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check notification event files (JSON, or JSON lines with --lines) against the event schema."
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
        for file in files {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let contents = FileManager.default.contents(atPath: file) else {
                    throw ValidationError("cannot read \(file)")
                }
                data = contents
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
        print("\(checked - failures) valid, \(failures) invalid")
        if failures > 0 { throw ExitCode(1) }
    }
}
