import Foundation
import TestSupport
import Testing

/// README.md's walkthrough, run as written (in a fresh directory, the built binaries first on PATH): a new
/// user following it gets a checked configuration, a push sent by hand, a result per event, a dead letter and
/// its replay.
@Suite struct ReadmeWalkthroughTests {
    @Test(.timeLimit(.minutes(4)))
    func theWalkthroughRunsAsWritten() async throws {
        var script = try Checkout.readmeBlock(after: "### Walkthrough: the relay by hand", language: "sh")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("walkthrough-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(script.contains("/tmp/relay-walkthrough"))
        script = script.replacingOccurrences(of: "/tmp/relay-walkthrough", with: directory)
        let binaries = try RelayProcess.binary().deletingLastPathComponent().path
        let path = binaries + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        // Only the walkthrough's own settings: no APNS_RELAY_* from the test environment.
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APNS_RELAY_") }
        environment["PATH"] = path
        // If a step hangs (kcat waits for records that never come), the test's timeout ends bash; the trap
        // then stops the walkthrough's background processes instead of leaving them running.
        let guarded = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script + "\n"
        let result = try await runProcess(
            "/bin/bash", ["-euo", "pipefail", "-c", guarded], environment: environment, timeout: .seconds(200)
        )
        let output = result.stdout + result.stderr
        #expect(result.status == 0, "\(output.suffix(6000))")
        #expect(output.contains("OK: "), "check passed: \(output.suffix(6000))")
        #expect(output.contains("status 200"), "send: \(output.suffix(6000))")
        #expect(output.contains(#"good {"id":"w1""#) && output.contains(#""outcome":"delivered""#), "\(output.suffix(6000))")
        #expect(output.contains(#"broken {"id":"w2""#) && output.contains(#""outcome":"invalid""#), "\(output.suffix(6000))")
        #expect(output.contains("__connect.errors.exception.class.name=schema_violation"), "dead letter: \(output.suffix(6000))")
        #expect(output.contains("1 matched, 1 would be replayed"), "\(output.suffix(6000))")
        #expect(output.contains("1 matched, 1 replayed"), "\(output.suffix(6000))")
    }
}
