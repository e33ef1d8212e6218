import APNsCore
import APNsMock
import Crypto
import Foundation
import ServiceSupport
import Synchronization
import TestSupport
import Testing



let deviceToken = String(repeating: "ab", count: 32)
let bundleID = "com.example.app"

/// The raw HTTP/2 side of the shared fixture: connections and requests built by hand.
extension MockFixture {
    func connect(alpn: Bool = true) async throws -> TestHTTP2Client {
        let client = try await TestHTTP2Client.connect(port: port, caPEM: caPEM, alpn: alpn)
        onStop { await client.close() }
        return client
    }

    var authorization: (String, String) { ("authorization", authorizationValue) }

    /// A valid alert push, with `overrides` replacing (or, with an empty value, removing) headers.
    func request(
        token: String = deviceToken,
        _ overrides: [(String, String?)] = [],
        body: [UInt8] = Array(#"{"aps":{"alert":"hi"}}"#.utf8),
        method: String = "POST",
        path: String? = nil
    ) -> TestRequest {
        var headers: [(String, String)] = [
            authorization, ("apns-topic", bundleID), ("apns-push-type", "alert"), ("apns-priority", "10"),
        ]
        apply(overrides, to: &headers)
        return TestRequest(path: path ?? "/3/device/\(token)", headers: headers, body: body, method: method)
    }
}



/// Broadcast sends and channel management, built by hand like `request`.
extension MockFixture {
    /// A connection to the channel-management port (the fixture must set `managementPort`).
    func connectManagement() async throws -> TestHTTP2Client {
        let port = try #require(server.managementPort, "the fixture has no management port")
        let client = try await TestHTTP2Client.connect(port: port, caPEM: caPEM)
        onStop { await client.close() }
        return client
    }

    /// A valid broadcast send to `channelID` of `app`, with `overrides` replacing (or, with `nil`, removing)
    /// headers.
    func broadcast(
        channelID: String,
        app: String = bundleID,
        _ overrides: [(String, String?)] = [],
        body: [UInt8] = Array(liveActivityUpdate.utf8),
        method: String = "POST",
        path: String? = nil
    ) -> TestRequest {
        var headers: [(String, String)] = [
            authorization, ("apns-push-type", "liveactivity"), ("apns-channel-id", channelID), ("apns-priority", "10"),
        ]
        apply(overrides, to: &headers)
        return TestRequest(path: path ?? "/4/broadcasts/apps/\(app)", headers: headers, body: body, method: method)
    }

    /// A channel-management request: `channels` (`all: false`) or `all-channels` of `app`.
    func channelRequest(
        _ method: String,
        app: String = bundleID,
        all: Bool = false,
        channelID: String? = nil,
        _ overrides: [(String, String?)] = [],
        body: [UInt8] = [],
        path: String? = nil
    ) -> TestRequest {
        var headers: [(String, String)] = [authorization]
        if let channelID { headers.append(("apns-channel-id", channelID)) }
        apply(overrides, to: &headers)
        let resource = all ? "all-channels" : "channels"
        return TestRequest(path: path ?? "/1/apps/\(app)/\(resource)", headers: headers, body: body, method: method)
    }

    /// A create request with this body (default: a No-Message-Stored Live Activity channel).
    func createChannel(app: String = bundleID, body: String = #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
        -> TestRequest
    {
        channelRequest("POST", app: app, body: Array(body.utf8))
    }

    private func apply(_ overrides: [(String, String?)], to headers: inout [(String, String)]) {
        for (name, value) in overrides {
            headers.removeAll { $0.0 == name }
            if let value { headers.append((name, value)) }
        }
    }
}

/// A Live Activity update as a broadcast body.
let liveActivityUpdate = #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":"1:0"}}}"#

/// Parses a JSON object body.
func jsonObject(_ body: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
}
