import Foundation
import Testing

/// `apns-relay validate` and `apns-relay run`'s start-up checks, run as a user runs them.
@Suite struct CommandLineTests {
    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = try RelayProcess.binary()
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    private func examples(_ kind: String) -> [String] {
        Checkout.examples("notification-event", kind).map { Checkout.root.appendingPathComponent("Schemas/examples/\($0.name)").path }
    }

    @Test func validateAcceptsTheSchemasExamples() throws {
        let files = examples("valid")
        try #require(!files.isEmpty)
        let (status, output) = try run(["validate"] + files)
        #expect(status == 0, "\(output)")
        #expect(output.contains("\(files.count) valid, 0 invalid"), "\(output)")
    }

    @Test func validateRefusesEveryCounterExampleAndSaysWhere() throws {
        let files = examples("invalid")
        try #require(!files.isEmpty)
        let (status, output) = try run(["validate"] + files)
        #expect(status == 1)
        #expect(output.contains("0 valid, \(files.count) invalid"), "\(output)")
        #expect(output.contains("/deviceToken") || output.contains("/pushType"), "errors name a JSON pointer: \(output)")
    }

    @Test func runRefusesABadSettingWithTheKeyNamed() throws {
        let (status, output) = try run(["run"], environment: [
            "APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS": "lots",
            "APNS_RELAY_APNS_TOKEN_KEY_ID": "ABC123DEFG", "APNS_RELAY_APNS_TOKEN_TEAM_ID": "DEF123GHIJ",
            "APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": "/k.p8",
        ])
        #expect(status != 0)
        #expect(output.contains("relay.maxInFlightEvents"), "\(output)")
    }

    @Test func runRefusesAMissingKeyFileClearly() throws {
        let (status, output) = try run(["run"], environment: [
            "APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "APNS_RELAY_APNS_TOKEN_KEY_ID": "ABC123DEFG",
            "APNS_RELAY_APNS_TOKEN_TEAM_ID": "DEF123GHIJ", "APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": "/nonexistent/key.p8",
            "APNS_RELAY_ADMIN_PORT": "0",
        ])
        #expect(status != 0)
        #expect(output.contains("/nonexistent/key.p8"), "\(output)")
    }
}
