import RelayApp
import Testing

/// The kubelet gives every pod the service-link variables of every Service in its namespace
/// (`enableServiceLinks` defaults to true); a Service named `apns-relay` puts `APNS_RELAY_…` variables into
/// the relay's environment. The expected variables are written out here in the format Kubernetes documents
/// ("Discovering services", environment variables), not derived from the code under test.
@Suite struct ServiceLinkVariableTests {
    private let minimal = [
        "APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "b:9092", "APNS_RELAY_APNS_TOKEN_KEY_ID": "ABC123DEFG",
        "APNS_RELAY_APNS_TOKEN_TEAM_ID": "DEF123GHIJ", "APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": "/k.p8",
    ]

    /// `helm install apns-relay` renders a Service `apns-relay` with one port, `metrics` 9090; a second
    /// team's Service `apns-relay-extra` has two ports (`http` 8080, `grpc` 9000/TCP) and an IPv6 cluster IP.
    private let kubelet = [
        "APNS_RELAY_SERVICE_HOST": "10.96.14.7",
        "APNS_RELAY_SERVICE_PORT": "9090",
        "APNS_RELAY_SERVICE_PORT_METRICS": "9090",
        "APNS_RELAY_PORT": "tcp://10.96.14.7:9090",
        "APNS_RELAY_PORT_9090_TCP": "tcp://10.96.14.7:9090",
        "APNS_RELAY_PORT_9090_TCP_PROTO": "tcp",
        "APNS_RELAY_PORT_9090_TCP_PORT": "9090",
        "APNS_RELAY_PORT_9090_TCP_ADDR": "10.96.14.7",
        "APNS_RELAY_EXTRA_SERVICE_HOST": "fd00:10:96::3a",
        "APNS_RELAY_EXTRA_SERVICE_PORT": "8080",
        "APNS_RELAY_EXTRA_SERVICE_PORT_HTTP": "8080",
        "APNS_RELAY_EXTRA_SERVICE_PORT_GRPC": "9000",
        "APNS_RELAY_EXTRA_PORT": "tcp://[fd00:10:96::3a]:8080",
        "APNS_RELAY_EXTRA_PORT_8080_TCP": "tcp://[fd00:10:96::3a]:8080",
        "APNS_RELAY_EXTRA_PORT_8080_TCP_PROTO": "tcp",
        "APNS_RELAY_EXTRA_PORT_8080_TCP_PORT": "8080",
        "APNS_RELAY_EXTRA_PORT_8080_TCP_ADDR": "fd00:10:96::3a",
        "APNS_RELAY_EXTRA_PORT_9000_TCP": "tcp://[fd00:10:96::3a]:9000",
        "APNS_RELAY_EXTRA_PORT_9000_TCP_PROTO": "tcp",
        "APNS_RELAY_EXTRA_PORT_9000_TCP_PORT": "9000",
        "APNS_RELAY_EXTRA_PORT_9000_TCP_ADDR": "fd00:10:96::3a",
    ]

    private func read(_ environment: [String: String]) async throws -> RelayAppConfiguration {
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: environment, overrides: [:])
        return try RelayAppConfiguration(reader: reader)
    }

    private func problems(_ environment: [String: String]) async throws -> [String] {
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: environment, overrides: [:])
        return try #require(throws: ConfigurationError.self) { try RelayAppConfiguration(reader: reader) }.problems
    }

    @Test func theKubeletsServiceLinksForTwoRelayServicesAreNotConfiguration() async throws {
        let configuration = try await read(minimal.merging(kubelet) { $1 })
        #expect(configuration.ignoredVariables == kubelet.keys.sorted())
        #expect(configuration.kafka.bootstrapServers == ["b:9092"])
    }

    @Test func aMisspeltKeyBesideServiceLinksIsStillRefused() async throws {
        let environment = minimal.merging(kubelet) { $1 }.merging(["APNS_RELAY_KAFKA_BOOTSTRAP_SERVERZ": "c:9092"]) { $1 }
        #expect(try await problems(environment) == [
            "unknown environment variable APNS_RELAY_KAFKA_BOOTSTRAP_SERVERZ; did you mean APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS (kafka.bootstrapServers)?",
        ])
    }

    /// The name alone is not enough: each of these has a service link's name and a value the kubelet never writes.
    @Test(arguments: [
        ("APNS_RELAY_SERVICE_HOST", "relay.internal"),
        ("APNS_RELAY_SERVICE_PORT", "http"),
        ("APNS_RELAY_SERVICE_PORT_METRICS", "90900"),
        ("APNS_RELAY_PORT", "9090"),
        ("APNS_RELAY_PORT", "http://10.96.14.7:9090"),
        ("APNS_RELAY_PORT_9090_TCP", "tcp://10.96.14.7:9091"),
        ("APNS_RELAY_PORT_9090_TCP", "udp://10.96.14.7:9090"),
        ("APNS_RELAY_PORT_9090_TCP_PROTO", "udp"),
        ("APNS_RELAY_PORT_9090_TCP_PORT", "9091"),
        ("APNS_RELAY_PORT_9090_TCP_ADDR", "10.96.14.256"),
        ("APNS_RELAY_PORT_9090_HTTP", "tcp://10.96.14.7:9090"),
        ("APNS_RELAY_PORT_0_TCP_PORT", "0"),
    ])
    func aServiceLinkNameWithAnotherValueIsRefused(name: String, value: String) async throws {
        let found = try await problems(minimal.merging([name: value]) { $1 })
        #expect(found.count == 1 && found[0].hasPrefix("unknown environment variable \(name)"), "\(found)")
    }

    @Test func aServiceWhoseLinkIsARealKeyIsNamedInTheError() async throws {
        // A Service named apns-relay-admin: its `_PORT` variable is admin.port's.
        let found = try await problems(minimal.merging(["APNS_RELAY_ADMIN_PORT": "tcp://10.96.0.20:80"]) { $1 })
        #expect(found == [
            "configuration key 'admin.port' (APNS_RELAY_ADMIN_PORT): 'tcp://10.96.0.20:80' is not an integer — this is the kubelet's "
                + "service-link variable of a Service named 'apns-relay-admin'; set enableServiceLinks: false in the pod spec (the chart "
                + "does) or rename that Service",
        ])
    }

    @Test(arguments: [
        ("APNS_RELAY_SERVICE_HOST", "10.0.0.1", "APNS_RELAY"),
        ("APNS_RELAY_PORT_9090_TCP_ADDR", "10.0.0.1", "APNS_RELAY"),
        ("APNS_RELAY_EXTRA_PORT", "sctp://10.0.0.1:38412", "APNS_RELAY_EXTRA"),
        ("APNS_RELAY_A__B_SERVICE_PORT_WEB_UI", "80", "APNS_RELAY_A__B"),
        ("APNS_RELAY_EXTRA_PORT_53_UDP", "udp://[::1]:53", "APNS_RELAY_EXTRA"),
        ("APNS_RELAY_V4_SERVICE_HOST", "::ffff:10.0.0.1", "APNS_RELAY_V4"),
    ])
    func theServiceIsReadFromTheName(name: String, value: String, service: String) {
        #expect(ServiceLinkVariable(name: name, value: value)?.service == service)
    }

    @Test func aNameWithNoServiceBeforeItsShapeIsNotALink() {
        #expect(ServiceLinkVariable(name: "SERVICE_HOST", value: "10.0.0.1") == nil)
        #expect(ServiceLinkVariable(name: "_PORT", value: "tcp://10.0.0.1:80") == nil)
        #expect(ServiceLinkVariable(name: "apns_relay_SERVICE_HOST", value: "10.0.0.1") == nil)
    }
}
