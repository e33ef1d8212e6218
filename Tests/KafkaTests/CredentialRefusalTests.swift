import Kafka
import Testing

/// Which of librdkafka's errors mean that a broker refused the client's credentials: the relay stops its
/// start on one (retrying cannot help), so a connection that merely broke must not count. The messages are
/// librdkafka's own (2.0 and 2.16) and OpenSSL's.
@Suite struct CredentialRefusalTests {
    private func error(_ code: KafkaResponseCode, _ message: String) -> KafkaError {
        KafkaError(code: .broker, responseCode: code, message: message)
    }

    @Test func aBrokerVerdictIsARefusal() {
        #expect(error(.saslAuthenticationFailed, "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256").refusesCredentials)
        #expect(error(.authentication, "sasl_ssl://127.0.0.1:9093/1: SASL SCRAM-SHA-512 mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's supported mechanisms: PLAIN").refusesCredentials)
        #expect(error(.brokerTransport, "ssl://127.0.0.1:9093/1: SSL handshake failed: error:0A000418:SSL routines::tlsv13 alert unknown ca").refusesCredentials)
    }

    /// librdkafka 2.16 reports a connection the broker closed in the middle of the SASL handshake (a broker
    /// restart, a dropped connection) as `_AUTHENTICATION`: nothing was judged, and librdkafka reconnects.
    @Test func aConnectionLostDuringTheHandshakeIsNot() {
        #expect(!error(.authentication, "GroupCoordinator: SASL SCRAM-SHA-256 mechanism handshake failed: Local: Broker transport failure: broker's supported mechanisms: (n/a) (after 0ms in state DOWN)").refusesCredentials)
        #expect(!error(.authentication, "sasl_plaintext://127.0.0.1:33465/1: SASL PLAIN mechanism handshake failed: Local: Timed out: broker's supported mechanisms: (n/a)").refusesCredentials)
        #expect(!error(.brokerTransport, "sasl_plaintext://127.0.0.1:33465/1: Disconnected: connection closed by peer: receive 0 after POLLIN (after 3595ms in state UP)").refusesCredentials)
    }
}
