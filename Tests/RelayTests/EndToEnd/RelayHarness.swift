import Foundation
import Logging
import Relay
import RelayApp
import RelaySandbox
import ServiceLifecycle
import TestSupport
import Testing

/// Runs a relay (in this process) against a sandbox for the duration of `body`, then shuts it down
/// gracefully and checks that it stopped cleanly.
func withRelay<T: Sendable>(
    _ sandbox: RelaySandbox, groupID: String = "relay-\(UUID().uuidString.prefix(8))",
    overrides: [String: String] = [:], logger: Logger = Logger(label: "test"),
    _ body: (RelayApp) async throws -> T
) async throws -> T {
    try await withRelay(try await sandbox.relayConfiguration(groupID: groupID, overrides: overrides), logger: logger, body)
}

/// Runs a relay (in this process) with `configuration` for the duration of `body`, then shuts it down
/// gracefully and checks that it stopped cleanly.
func withRelay<T: Sendable>(
    _ configuration: RelayAppConfiguration, logger: Logger = Logger(label: "test"), _ body: (RelayApp) async throws -> T
) async throws -> T {
    let app = try RelayApp(configuration: configuration, logger: logger)
    let group = app.serviceGroup(logger: logger)
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        do {
            let value = try await body(app)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return value
        } catch {
            await group.triggerGracefulShutdown()
            try? await tasks.waitForAll()
            throw error
        }
    }
}

/// A sandbox for one test: its own cluster, mock APNs and key; stopped afterwards.
func withSandbox<T: Sendable>(
    _ options: RelaySandbox.Options = RelaySandbox.Options(), logger: Logger = Logger(label: "test"),
    _ body: (RelaySandbox) async throws -> T
) async throws -> T {
    let sandbox = try await RelaySandbox(options: options, logger: logger)
    do {
        let value = try await body(sandbox)
        await sandbox.stop()
        return value
    } catch {
        await sandbox.stop()
        throw error
    }
}

extension OutputReader.Record {
    var keyString: String { key.map { String(decoding: $0, as: UTF8.self) } ?? "" }
    func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value.map { String(decoding: $0, as: UTF8.self) }
    }
}

/// Validates JSON records against a schema file with Python's `jsonschema` (an implementation independent
/// of ours). `make test` creates `.venv` with it; without it the check fails rather than passes silently.
func validateWithPython(_ records: [[UInt8]], schema: String) async throws -> [String] {
    let python = Checkout.root.appendingPathComponent(".venv/bin/python").path
    let interpreter = FileManager.default.isExecutableFile(atPath: python) ? python : "/usr/bin/python3"
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("records-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let lines = directory.appendingPathComponent("records.jsonl")
    try Data(records.map { $0 + [UInt8(ascii: "\n")] }.joined()).write(to: lines)
    let script = """
        import json, sys
        from jsonschema import Draft7Validator
        schema = json.load(open(sys.argv[1]))
        v = Draft7Validator(schema)
        bad = 0
        for n, line in enumerate(open(sys.argv[2])):
            for e in v.iter_errors(json.loads(line)):
                bad += 1
                print(f"record {n}: {'/'.join(map(str, e.path))}: {e.message}")
        sys.exit(1 if bad else 0)
        """
    let result = try await runProcess(interpreter, ["-c", script, Checkout.schemaFile(schema).path, lines.path])
    let output = result.stdout + result.stderr
    if result.status != 0 && output.isEmpty { return ["python exited \(result.status)"] }
    return output.split(separator: "\n").map(String.init)
}

extension Logger {
    /// A logger for tests: warnings and worse only, so test output stays readable.
    static func quiet(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .warning
        return logger
    }
}
