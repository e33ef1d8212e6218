import Foundation
import RelaySandbox

/// `tracing [--events N] [--partitions P]`: what trace context costs (issue #25). The same backlog through
/// the relay four times, each in a sandbox of its own: tracing off; on, exporting to a collector in this
/// process (OTLP/HTTP, `OTLPCollector`), with 1 % of the traces sampled; with all of them; and with all of
/// them to a collector that is down (nothing listens: every export fails, spans are dropped and counted).
/// The events carry no producer context, so the relay starts each trace and `tracing.sampleRatio` decides.
func tracingCost() async throws {
    let count = option("events", 100_000)
    let partitions = option("partitions", 32)
    say("== tracing: \(count) events over \(partitions) partitions, off / on at 1 % / on at 100 % sampling / collector down")
    var runs: [(name: String, cpu: Double, rate: Double, spans: Int, dropped: Int)] = []
    let scenarios: [(name: String, ratio: Double?, collectorDown: Bool)] = [
        ("off", nil, false), ("on, 1 % sampled", 0.01, false), ("on, 100 % sampled", 1.0, false),
        ("on, 100 % sampled, collector down", 1.0, true),
    ]
    for (name, ratio, collectorDown) in scenarios {
        var options = RelaySandbox.Options()
        options.partitions = partitions
        let sandbox = try await RelaySandbox(options: options, logger: logger)
        try await sandbox.produceKept(makeEvents(count, payload: 300))
        let collector = try OTLPCollector(keepsSpans: false)
        if collectorDown { collector.stop() }
        let adminPort = try freeLocalPort()
        let reader = try OutputReader(sandbox: sandbox, logger: logger)
        var tally = ResultTally(resultsTopic: options.topics.results, keepTimings: true)
        var extra = ["APNS_RELAY_ADMIN_PORT": "\(adminPort)"]
        if let ratio {
            extra["APNS_RELAY_TRACING_OTLP_ENDPOINT"] = collector.endpoint
            extra["APNS_RELAY_TRACING_SAMPLE_RATIO"] = String(ratio)
        }
        let relay = try RelayUnderTest(sandbox, extra: extra)
        try await tally.collect(from: reader, untilResults: count, timeout: .seconds(900))
        let cpu = relay.probe.cpuSeconds ?? 0
        let dropped = try metric("apns_relay_trace_spans_dropped_total", adminPort: adminPort)
        relay.stop()  // the exporter sends what it still holds as the relay stops
        await reader.close()
        await sandbox.stop()
        let rate = eventsPerSecond(tally, count)
        say("tracing \(name): \(f(cpu * 1e6 / Double(count), 1)) µs CPU/event, \(f(rate, 0)) events/s, \(collector.spanCount) spans in \(collector.exportCount) exports, \(dropped) dropped")
        collector.stop()
        runs.append((name, cpu * 1e6 / Double(count), rate, collector.spanCount, dropped))
        if tally.distinctKeys < count { throw BenchmarkError("tracing \(name): only \(tally.distinctKeys) of \(count) events have a result") }
    }
    let off = runs[0].cpu
    for run in runs {
        row("tracing \(run.name): relay CPU µs/event (\(count / 1000)k events)", f(run.cpu, 1), floor: "tracing off \(f(off, 1))", ratio: f(run.cpu / off, 2))
    }
    for run in runs.dropFirst() {
        row("tracing \(run.name): events/s", f(run.rate, 0), floor: "tracing off \(f(runs[0].rate, 0))", ratio: f(run.rate / runs[0].rate, 2))
        row("tracing \(run.name): spans received / dropped (3 per sampled event)", "\(run.spans) / \(run.dropped)")
    }
}

/// A counter's value in the relay's /metrics (0 when the relay has not counted any yet).
private func metric(_ name: String, adminPort: Int) throws -> Int {
    let (output, _) = try runMeasured("curl -sf --max-time 2 http://127.0.0.1:\(adminPort)/metrics")
    return output.split(separator: "\n").filter { $0.hasPrefix(name) }
        .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0) { $0 + Int($1) }
}
