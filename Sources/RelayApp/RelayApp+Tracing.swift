import Foundation
import Logging
import Metrics
import OTel
import Relay
import ServiceLifecycle
import ServiceSupport
import Synchronization
import Tracing

extension RelayApp {
    /// swift-otel's tracer and its exporter (a service to run beside the relay), from `tracing.*`, or
    /// `nil` when tracing is off.
    ///
    /// OpenTelemetry's `OTEL_*` variables still apply on top (swift-otel reads them), as operators expect:
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`…
    static func tracing(
        _ configuration: RelayAppConfiguration, environment: [String: String], logger: Logger
    ) throws -> (tracing: EventTracing, service: any Service)? {
        let settings = configuration.tracing
        guard settings.isEnabled(environment: environment) else { return nil }
        var otel = OTel.Configuration.default
        otel.serviceName = settings.serviceName
        otel.logs.enabled = false
        otel.metrics.enabled = false
        otel.propagators = [.traceContext]
        otel.traces.exporter = .otlp
        otel.traces.otlpExporter.protocol = .httpProtobuf
        otel.traces.otlpExporter.timeout = settings.exportTimeout
        if let endpoint = settings.otlpEndpoint {
            otel.traces.otlpExporter.endpoint = endpoint.hasSuffix("/v1/traces") ? endpoint
                : endpoint.trimmingSuffix("/") + "/v1/traces"
        }
        otel.traces.sampler = .parentBasedTraceIDRatio(ratio: settings.sampleRatio) ?? .parentBasedAlwaysOn
        otel.traces.batchSpanProcessor.maxQueueSize = settings.maxQueueSize
        otel.traces.batchSpanProcessor.maxExportBatchSize = min(512, settings.maxQueueSize)
        otel.diagnosticLogger = .custom(Logger(label: "apns-relay.tracing") { _ in
            TracingDiagnostics(forwardingTo: logger, dropped: Counter(label: "apns_relay_trace_spans_dropped_total"),
                               failedExports: Counter(label: "apns_relay_trace_exports_failed_total"))
        })
        otel.diagnosticLogLevel = .warning
        let backend = try OTel.makeTracingBackend(configuration: otel)
        var eventTracing = EventTracing.Configuration()
        eventTracing.parentIsProducer = settings.parentIsProducer
        eventTracing.consumerGroup = configuration.kafka.groupID
        return (EventTracing(tracer: backend.factory, configuration: eventTracing), backend.service)
    }
}

private extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

/// swift-otel's own log lines, passed to the relay's log at most once a minute per message (a collector that
/// is down would otherwise log every failed batch), and read for what the relay counts: spans dropped because
/// the export queue was full (the exporter never makes the relay wait), and batches that failed to export.
/// The `carrier` swift-otel attaches to an extraction failure (a record's headers) is not logged.
struct TracingDiagnostics: LogHandler {
    var forwardingTo: Logger
    let dropped: Counter
    let failedExports: Counter
    let throttle = LogThrottle(interval: .seconds(60))
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .warning

    init(forwardingTo: Logger, dropped: Counter, failedExports: Counter) {
        self.forwardingTo = forwardingTo
        self.dropped = dropped
        self.failedExports = failedExports
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata.merging(event.metadata ?? [:]) { $1 }
        merged["carrier"] = nil
        if let count = merged["dropped_count"].flatMap({ Int("\($0)") }) { dropped.increment(by: count) }
        let message = "\(event.message)"
        if message.hasPrefix("Failed to export") { failedExports.increment() }
        guard let suppressed = throttle.admit(message) else { return }
        if suppressed > 0 { merged["suppressed"] = "\(suppressed)" }
        merged["component"] = "tracing"
        forwardingTo.log(level: event.level, "\(message)", metadata: merged)
    }
}
