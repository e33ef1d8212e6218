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
        for (name, value) in overrides {
            headers.removeAll { $0.0 == name }
            if let value { headers.append((name, value)) }
        }
        return TestRequest(path: path ?? "/3/device/\(token)", headers: headers, body: body, method: method)
    }
}



