extension RelayAppConfiguration {
    /// `tracing.*`: W3C trace context and spans, exported over OTLP/HTTP (issue #25). Off unless an
    /// endpoint is given here or in OpenTelemetry's `OTEL_EXPORTER_OTLP_ENDPOINT` /
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
    package struct Tracing: Sendable {
        /// Where spans go: an OTLP/HTTP base URL (`http://otel-collector:4318`; `/v1/traces` is added).
        package var otlpEndpoint: String?
        package var serviceName = "apns-relay"
        /// Of the traces the relay starts itself (events without a producer context), the share recorded;
        /// an event with one follows its sampled flag.
        package var sampleRatio = 1.0
        /// The producer's context is the parent of the event's span (as well as linked).
        package var parentIsProducer = true
        /// Finished spans waiting for export; past it, spans are dropped (counted), never waited for.
        package var maxQueueSize = 2048
        /// How long an export may take before it is abandoned.
        package var exportTimeout: Duration = .seconds(10)

        /// Whether spans are made and trace headers read and written.
        package func isEnabled(environment: [String: String]) -> Bool {
            otlpEndpoint != nil || environment["OTEL_EXPORTER_OTLP_ENDPOINT"] != nil || environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != nil
        }
    }
}
