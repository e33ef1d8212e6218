import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import Relay
import RelayApp
import ServiceLifecycle

/// `apns-relay run`: the service.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the relay: Kafka events → APNs → result, removed-token and dead-letter topics.",
        discussion: """
            Configuration comes from --config (YAML or JSON), then APNS_RELAY_* environment variables, then \
            --set key=value flags (highest precedence). README.md lists every key.
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(help: "Shortcut for --set kafka.bootstrapServers=…")
    var bootstrapServers: String?

    @Option(help: "Shortcut for --set log.level=…")
    var logLevel: String?

    @Option(help: "Shortcut for --set admin.port=… (0 disables the admin endpoint).")
    var adminPort: Int?

    func run() async throws {
        var settings: [String: String] = [:]
        if let bootstrapServers { settings["kafka.bootstrapServers"] = bootstrapServers }
        if let logLevel { settings["log.level"] = logLevel }
        if let adminPort { settings["admin.port"] = String(adminPort) }

        // Before the first large buffer: glibc's mmap threshold (see AllocatorSettings).
        AllocatorSettings.apply(environment: ProcessInfo.processInfo.environment)

        // Start-up in the order that keeps a failure quiet and early: everything that needs no network is
        // checked before a Kafka client exists (librdkafka starts connecting, and logging, at once).
        // 1. The configuration: every problem at once.
        let reader = try await options.sources(adding: settings)
        let configuration = try RelayAppConfiguration(reader: reader)

        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler =
                configuration.logFormat == .json
                ? JSONLogHandler.standardError(label: label) : StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "apns-relay")
        // Before anything slow starts: a signal during start-up is remembered, not lost or fatal.
        let signals = ShutdownSignals(logger: logger)

        // 2. The admin port: bound now, so a port in use fails before anything else starts.
        var admin: AdminServer?
        if configuration.admin.port > 0 {
            admin = try await AdminServer.bind(
                host: configuration.admin.host, port: configuration.admin.port,
                metrics: { registry.emitToBuffer() }, logger: logger
            )
        }
        // 3. The credentials (key, certificate and CA files), then 4. the Kafka clients (RelayApp's order).
        let app: RelayApp
        do {
            app = try RelayApp(configuration: configuration, logger: logger)
        } catch {
            await admin?.close()
            throw error
        }
        var extra: [any Service] = []
        if let admin {
            // `apns_relay_ready`: what /readyz would answer, read at each scrape (an alert on a replica that
            // stays unready needs it as a series; Kubernetes keeps readiness to itself).
            let ready = Gauge(label: "apns_relay_ready")
            let process = ProcessGauges()
            admin.serve(AdminServer.Probes(
                metrics: {
                    ready.record(app.relay.readiness == nil ? 1 : 0)
                    process.update()
                    return registry.emitToBuffer()
                },
                liveness: { app.relay.liveness },
                readiness: { app.relay.readiness }
            ))
            extra.append(admin)
        }
        let group = app.serviceGroup(adding: extra, logger: logger)
        // The first signal shuts the group down gracefully (ShutdownSignals ends the process on a second).
        let firstSignal = signals.first
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask {
                if await firstSignal.wait() != nil { await group.triggerGracefulShutdown() }
            }
            try await group.run()
            tasks.cancelAll()
        }
        withExtendedLifetime(signals) {}
    }
}
