import Foundation
import RelaySandbox
import TestSupport
import Testing

/// `apns-relay channels create|get|delete|list` and `apns-relay send --channel-id`, run as a user runs them,
/// against the sandbox's mock APNs management port (no Kafka settings given).
@Suite struct ChannelsCommandTests {
    private let bundle = "com.example.app"

    /// The sandbox's APNs settings only: the commands must not need Kafka.
    private func environment(_ sandbox: RelaySandbox) -> [String: String] {
        sandbox.relayEnvironment().filter { !$0.key.hasPrefix("APNS_RELAY_KAFKA_") }
    }

    private func run(_ arguments: [String], _ environment: [String: String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let result = try await runProcess(try RelayProcess.binary().path, arguments, environment: environment, timeout: .seconds(60))
        return (result.status, result.stdout, result.stderr)
    }

    /// The one JSON object a successful command prints.
    private func json(_ output: String) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        return try #require(object, "not a JSON object: \(output)")
    }

    @Test func createsListsReadsAndDeletesChannels() async throws {
        try await withSandbox { sandbox in
            let env = environment(sandbox)
            let common = ["--bundle-id", bundle, "--environment", "development"]

            let created = try await run(["channels", "create"] + common + ["--storage-policy", "0"], env)
            #expect(created.status == 0, "\(created.stderr)")
            let first = try json(created.stdout)
            let id = try #require(first["channelId"] as? String)
            #expect(first["messageStoragePolicy"] as? Int == 0)
            #expect(first["bundleId"] as? String == bundle && first["environment"] as? String == "development")
            #expect(sandbox.apns.channels.storagePolicy(bundleID: bundle, channelID: id) == 0, "the mock has the channel")

            let second = try json(try await run(["channels", "create"] + common + ["--storage-policy", "1"], env).stdout)
            let other = try #require(second["channelId"] as? String)
            #expect(other != id)

            let listed = try await run(["channels", "list"] + common, env)
            #expect(listed.status == 0, "\(listed.stderr)")
            let list = try json(listed.stdout)
            #expect(list["channels"] as? [String] == [id, other])
            #expect(list["count"] as? Int == 2)

            let read = try await run(["channels", "get"] + common + ["--channel-id", other], env)
            #expect(read.status == 0, "\(read.stderr)")
            let channel = try json(read.stdout)
            #expect(channel["messageStoragePolicy"] as? Int == 1)
            #expect(channel["pushType"] as? String == "LiveActivity")

            let deleted = try await run(["channels", "delete"] + common + ["--channel-id", id, "--yes"], env)
            #expect(deleted.status == 0, "\(deleted.stderr)")
            #expect(try json(deleted.stdout)["deleted"] as? Bool == true)
            #expect(try json(try await run(["channels", "list"] + common, env).stdout)["channels"] as? [String] == [other])

            // A deleted channel is gone for good: APNs' reason on standard error, exit status 1.
            let again = try await run(["channels", "get"] + common + ["--channel-id", id], env)
            #expect(again.status == 1, "\(again.stdout)\(again.stderr)")
            #expect(again.stderr.contains("ChannelNotRegistered"), "\(again.stderr)")
            #expect(again.stderr.contains("the other environment: this was --environment development"), "\(again.stderr)")
            #expect(again.stderr.components(separatedBy: "APNs refused it").count == 2, "said once: \(again.stderr)")
            #expect(again.stdout.isEmpty, "nothing on standard output when APNs refused")
        }
    }

    /// `channels delete` without `--yes`, with no terminal to ask (the test reads standard error through a
    /// pipe): the plan on standard error, `"deleted":false` on standard output, no request to the management
    /// host, and the channel still there; with `--yes` the same command deletes it.
    @Test func deleteWithoutYesPrintsThePlanAndDeletesNothing() async throws {
        try await withSandbox { sandbox in
            let env = environment(sandbox)
            let id = try sandbox.apns.channels.create(bundleID: bundle, storagePolicy: 1)
            let requests = sandbox.apns.statistics.managementRequests
            let command = ["channels", "delete", "--bundle-id", bundle, "--environment", "development", "--channel-id", id]

            let planned = try await run(command, env)
            #expect(planned.status == 0, "\(planned.stdout)\(planned.stderr)")
            for line in ["environment: development", "bundle id: \(bundle)", "channel id: \(id)",
                         "management host: 127.0.0.1:\(sandbox.managementPort)", "nothing deleted; add --yes"] {
                #expect(planned.stderr.contains(line), "\(line) in \(planned.stderr)")
            }
            #expect(try json(planned.stdout)["deleted"] as? Bool == false, "\(planned.stdout)")
            #expect(sandbox.apns.statistics.managementRequests == requests, "no request to the management host")
            #expect(sandbox.apns.statistics.responses["204"] == nil, "no deletion answered")
            #expect(sandbox.apns.channels.channels(bundleID: bundle) == [id], "the channel is still there")

            let deleted = try await run(command + ["--yes"], env)
            #expect(deleted.status == 0, "\(deleted.stderr)")
            #expect(try json(deleted.stdout)["deleted"] as? Bool == true)
            #expect(sandbox.apns.statistics.responses["204"] == 1, "one deletion")
            #expect(sandbox.apns.channels.channels(bundleID: bundle).isEmpty)
        }
    }

    @Test func refusesBadArgumentsAndNamesAMissingCredential() async throws {
        try await withSandbox { sandbox in
            let env = environment(sandbox)
            // Wrong arguments: ArgumentParser's usage status (64), the subcommand's usage line.
            let badID = try await run(["channels", "get", "--bundle-id", bundle, "--channel-id", "not base64!"], env)
            #expect(badID.status == 64 && badID.stderr.contains("--channel-id"), "\(badID.stderr)")
            #expect(badID.stderr.contains("apns-relay channels get"), "\(badID.stderr)")
            let badPolicy = try await run(["channels", "create", "--bundle-id", bundle, "--storage-policy", "2"], env)
            #expect(badPolicy.status == 64 && badPolicy.stderr.contains("--storage-policy"), "\(badPolicy.stderr)")
            // A suffixed bundle id would make a channel no broadcast reaches (broadcasts drop the suffix).
            let suffixed = try await run(["channels", "create", "--bundle-id", bundle + ".push-type.liveactivity", "--storage-policy", "1"], env)
            #expect(suffixed.status == 64 && suffixed.stderr.contains("without the push-type suffix"), "\(suffixed.stderr)")
            #expect(sandbox.apns.channels.channels(bundleID: bundle + ".push-type.liveactivity").isEmpty)
            // The bundle id is a segment of the management path: nothing that could change the request passes.
            for hostile in ["..", ".", "com.example..app", "com.example.app/../x", "com.example.app#x", "com.example.app\r\nx-injected: 1", "com.example.app?x=1"] {
                let refused = try await run(["channels", "list", "--bundle-id", hostile], env)
                #expect(refused.status == 64 && refused.stderr.contains("--bundle-id must be a bundle id"), "\(hostile): \(refused.stderr)")
            }
            #expect(sandbox.apns.statistics.managementRequests == 0, "none of them reached APNs")
            var limited = env
            limited["APNS_RELAY_APNS_TOPICS"] = "com.other.app"
            let uncovered = try await run(["channels", "list", "--bundle-id", bundle], limited)
            #expect(uncovered.status == 2, "\(uncovered.stderr)")
            #expect(uncovered.stderr.contains("no credential covers bundle id com.example.app"), "\(uncovered.stderr)")
            // Nothing listens on the management port: no answer, exit status 3.
            let refusing = try RefusingPort()
            var nowhere = env
            nowhere["APNS_RELAY_APNS_DEVELOPMENT_MANAGEMENT_PORT"] = String(refusing.port)
            let down = try await run(["channels", "list", "--bundle-id", bundle, "--environment", "development", "--timeout-ms", "3000"], nowhere)
            #expect(down.status == 3, "\(down.stdout)\(down.stderr)")
            #expect(down.stderr.contains("no answer from APNs"), "\(down.stderr)")
        }
    }

    /// `send --channel-id` broadcasts a Live Activity update to a channel and prints apns-request-id.
    @Test func sendBroadcastsToAChannel() async throws {
        try await withSandbox { sandbox in
            let env = environment(sandbox)
            let channel = try sandbox.apns.channels.create(bundleID: bundle, storagePolicy: 1)
            let sent = try await run(["send", "--channel-id", channel, "--topic", bundle, "--environment", "development"], env)
            #expect(sent.status == 0, "\(sent.stdout)\(sent.stderr)")
            #expect(sent.stdout.contains("sending liveactivity push to channel \(channel)"), "\(sent.stdout)")
            #expect(sent.stdout.contains("status 200  apns-request-id "), "\(sent.stdout)")
            let accepted = sandbox.apns.acceptedBroadcasts
            #expect(accepted.count == 1 && accepted.first?.channelID == channel)

            #expect(sandbox.apns.channels.delete(bundleID: bundle, channelID: channel))
            let gone = try await run(["send", "--channel-id", channel, "--topic", bundle, "--environment", "development"], env)
            #expect(gone.status == 1, "\(gone.stdout)")
            #expect(gone.stdout.contains("status 400  reason ChannelNotRegistered"), "\(gone.stdout)")

            let both = try await run(["send", "--channel-id", channel, "--device-token", "5e5e", "--topic", bundle], env)
            #expect(both.status == 64 && both.stderr.contains("--device-token and --channel-id are alternatives"), "\(both.stderr)")
        }
    }
}
