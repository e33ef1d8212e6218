import APNsCore
import Foundation
import Logging
import RelaySandbox
import TestSupport
import Testing

/// The chart's Grafana dashboard (`helm/apns-relay/dashboards/apns-relay.json`, issue #38) against a real
/// Prometheus scraping relays with traffic: every query of every panel, with the dashboard's variables filled
/// in as Grafana fills them, must answer with at least one number, and every metric it names must be in a
/// relay's `/metrics`. A renamed metric or a broken expression fails the test with the panel's title.
///
/// Two relay processes, one Prometheus (1 s scrapes; `namespace="messaging"` on every series, as Kubernetes
/// discovery adds it, so the namespace variable has a value to select):
/// - on librdkafka's mock cluster: delivered pushes on both lanes (a bulk and an urgent topic), 410 Unregistered
///   and BadDeviceToken answers (removed tokens), schema-invalid events (dead letters), broadcasts to a live and
///   a deleted channel, a certificate credential (its expiry gauge), librdkafka statistics on (consumer lag);
/// - with `kafka.exactlyOnce` on noida-db, the broker with transactions, for the "Transactions" row.
/// So no panel is left to a name-only check. Some panels show series this traffic leaves flat (retries,
/// possible duplicates, GOAWAYs, transport failures, connect failures, the guard tripped, records replaced):
/// the relay exports those from its start at 0, so their queries answer with 0, which proves the names and
/// the expressions, not the behaviour behind them (other tests cover that).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct DashboardEndToEndTests {
    let logger = Logger.quiet("dashboard")
    static let dashboardFile = Checkout.root.appendingPathComponent("helm/apns-relay/dashboards/apns-relay.json")

    @Test func everyPanelQueryAnswersFromRelaysWithTrafficAndABrokenOneIsNamed() async throws {
        let dashboard = try GrafanaDashboard(json: Data(contentsOf: Self.dashboardFile))
        #expect(dashboard.panels.count >= 25, "\(dashboard.panels.map(\.title))")
        #expect(dashboard.panels.contains { $0.title == "Transactions by outcome" }, "panels of a collapsed row are checked too")
        let directory = try makeTemporaryDirectory("dashboard")
        defer { try? FileManager.default.removeItem(at: directory) }
        let broker = try await NoidaBroker.start()
        do {
            var options = RelaySandbox.Options()
            options.partitions = 2
            options.topics.urgent = ["apns-urgent"]
            var eosOptions = RelaySandbox.Options()
            eosOptions.partitions = 2
            eosOptions.externalBootstrapServers = broker.bootstrapServers
            try await withSandbox(options, logger: logger) { sandbox in
                try await withSandbox(eosOptions, logger: logger) { eosSandbox in
                    try await check(dashboard, sandbox: sandbox, eosSandbox: eosSandbox, directory: directory)
                }
            }
        } catch {
            let log = broker.log
            await broker.stop()
            throw TestFailure("\(error); noida-db's output:\n\(log.suffix(2000))")
        }
        await broker.stop()
    }

    private func check(_ dashboard: GrafanaDashboard, sandbox: RelaySandbox, eosSandbox: RelaySandbox, directory: URL) async throws {
        let port = try freeLocalPort(), eosPort = try freeLocalPort()
        let prometheus = try await Prometheus.start(in: directory, scraping: [port, eosPort], labels: ["namespace": "messaging"])
        defer { prometheus.stop() }

        // Bulk-lane pushes: most delivered, every 8th token gone (410 Unregistered), every 8th registered in the
        // other environment (400 BadDeviceToken); two events the schema refuses; two broadcasts.
        var bulk: [(key: String, value: [UInt8])] = []
        for n in 0..<24 {
            let token = SampleEvents.token(n, salt: 0xDA5B)
            switch n % 8 {
            case 3: sandbox.apns.registry.unregister(token, sinceMilliseconds: 1_700_000_000_000)
            case 5: sandbox.apns.registry.register(token, environment: .production)
            default: break
            }
            bulk.append((key: "b\(n)", value: SampleEvents.event(id: "b\(n)", deviceToken: token)))
        }
        bulk += (0..<2).map { (key: "invalid\($0)", value: SampleEvents.event(id: "invalid\($0)", deviceToken: "not-hex")) }
        let channels = sandbox.apns.channels
        let live = try channels.create(bundleID: "com.example.app", storagePolicy: 1)
        let gone = try channels.create(bundleID: "com.example.app", storagePolicy: 0)
        #expect(channels.delete(bundleID: "com.example.app", channelID: gone))
        bulk += [(key: "live", value: SampleEvents.broadcast(id: "live", channelID: live)),
                 (key: "gone", value: SampleEvents.broadcast(id: "gone", channelID: gone))]
        let urgent = (0..<6).map { n in
            (key: "u\(n)", value: SampleEvents.event(id: "u\(n)", deviceToken: SampleEvents.token(100 + n, salt: 0xDA5B), priority: 10))
        }
        let transacted = (0..<10).map { n in (key: "t\(n)", value: SampleEvents.event(id: "t\(n)", deviceToken: SampleEvents.token(n))) }

        // A certificate credential beside the sandbox's token one, for the client certificate's expiry gauge.
        let certificate = try TestCertificate.write(
            in: directory, name: "beta", bundleID: "com.beta.app", notBefore: Date() - 86_400, notAfter: Date() + 300 * 86_400)
        var environment = sandbox.relayEnvironment(groupID: "dashboard-\(UUID().uuidString.prefix(8))")
        environment.merge([
            "APNS_RELAY_ADMIN_HOST": "127.0.0.1", "APNS_RELAY_ADMIN_PORT": String(port),
            // librdkafka's statistics on (the sandbox turns them off), for apns_relay_consumer_lag.
            "APNS_RELAY_KAFKA_STATISTICS_INTERVAL_MS": "500",
            "APNS_RELAY_APNS_TOPICS": "com.example.app", "APNS_RELAY_APNS_CREDENTIALS": "beta",
            "APNS_RELAY_APNS_CREDENTIAL_BETA_AUTH": "certificate", "APNS_RELAY_APNS_CREDENTIAL_BETA_TOPICS": "com.beta.app",
            "APNS_RELAY_APNS_CREDENTIAL_BETA_CERTIFICATE_CERTIFICATE_FILE": certificate.certificate,
            "APNS_RELAY_APNS_CREDENTIAL_BETA_CERTIFICATE_PRIVATE_KEY_FILE": certificate.key,
        ]) { $1 }
        let group = "dashboard-eos-\(UUID().uuidString.prefix(8))"
        var eosEnvironment = eosSandbox.relayEnvironment(groupID: group)
        eosEnvironment.merge([
            "APNS_RELAY_ADMIN_HOST": "127.0.0.1", "APNS_RELAY_ADMIN_PORT": String(eosPort),
            "APNS_RELAY_KAFKA_EXACTLY_ONCE": "true", "APNS_RELAY_KAFKA_TRANSACTIONAL_ID": "\(group)-0",
            "APNS_RELAY_KAFKA_TRANSACTION_INTERVAL_MS": "100",
        ]) { $1 }
        let relay = try RelayProcess(environment: environment)
        let eosRelay = try RelayProcess(environment: eosEnvironment)

        // The traffic goes once Prometheus has seen both relays ready, so it has their counters before it: a
        // counter first seen at its final value has a rate of 0, and a latency quantile of NaN.
        do {
            try await eventually("Prometheus sees both relays ready", within: .seconds(60), every: .milliseconds(250)) {
                try prometheus.query("sum(apns_relay_ready)") == 2
            }
        } catch {
            throw TestFailure("\(error); relay logs:\n\(relay.log.suffix(2000))\n\(eosRelay.log.suffix(2000))")
        }
        try await sandbox.produce(bulk)
        try await sandbox.produce(urgent, to: "apns-urgent")
        try await eosSandbox.produce(transacted)

        // Every event's result counted, as Prometheus sees it.
        for (target, count) in [(port, bulk.count + urgent.count), (eosPort, transacted.count)] {
            let query = #"sum(apns_relay_results_total{instance="127.0.0.1:\#(target)"})"#
            do {
                try await eventually("Prometheus counts \(count) results of the relay on port \(target)", within: .seconds(60), every: .milliseconds(250)) {
                    try prometheus.query(query) == Double(count)
                }
            } catch {
                throw TestFailure("\(error); relay log:\n\((target == port ? relay : eosRelay).log.suffix(3000))")
            }
        }
        // What both relays export now (the consumer lag gauges come with librdkafka's statistics, a little later).
        let checker = {
            var exported: Set<String> = []
            for target in [port, eosPort] {
                exported.formUnion(Self.metricNames(exposition: try await http("http://127.0.0.1:\(target)/metrics").body))
            }
            return DashboardCheck(prometheus: prometheus, exported: exported)
        }

        // Series made by the traffic reach Prometheus one scrape after their first count, and a rate needs two
        // samples of them: the queries are evaluated until all answer, at most 30 s.
        var problems = [DashboardCheck.Problem(panel: "(none)", message: "the check never ran: Prometheus or a relay did not answer")]
        try? await eventually("every panel answers", within: .seconds(30), every: .seconds(1)) {
            problems = try await checker().problems(dashboard)
            return problems.isEmpty
        }
        if !problems.isEmpty {
            Issue.record("panels without data:\n\(problems.map(\.description).joined(separator: "\n"))")
        }

        // The negative control: the same check, on the dashboard with one panel naming a metric the relay does
        // not export (a one-letter slip) and another with an expression Prometheus refuses, names both panels.
        let slip = try dashboard.editing(panel: "Dead letters") {
            $0.replacingOccurrences(of: "apns_relay_dead_letters_total", with: "apns_relay_dead_letter_total")
        }.editing(panel: "Threads") { "sum(rate(" + $0 }
        let caught = try await checker().problems(slip)
        #expect(Set(caught.map(\.panel)) == ["Dead letters", "Threads"], "\(caught)")
        #expect(caught.contains { $0.panel == "Dead letters" && $0.message.contains("apns_relay_dead_letter_total, which no relay exports") }, "\(caught)")
        #expect(caught.contains { $0.panel == "Dead letters" && $0.message.contains("answers nothing") }, "\(caught)")
        #expect(caught.contains { $0.panel == "Threads" && $0.message.contains("Prometheus refuses") }, "\(caught)")

        #expect(await relay.terminate(timeout: .seconds(30)) == 0)
        #expect(await eosRelay.terminate(timeout: .seconds(30)) == 0)
    }

    /// Metric names of a Prometheus text exposition: its samples' and its HELP and TYPE lines'.
    static func metricNames(exposition: String) -> Set<String> {
        Set(exposition.split(separator: "\n").compactMap { line -> String? in
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                return line.split(separator: " ").dropFirst(2).first.map(String.init)
            }
            guard !line.hasPrefix("#") else { return nil }
            return line.split(whereSeparator: { $0 == "{" || $0 == " " }).first.map(String.init)
        })
    }
}

/// The parts of a Grafana dashboard the check reads: its query variables and every panel's queries (those of
/// collapsed rows, which Grafana nests in the row, included; rows themselves have none).
private struct GrafanaDashboard {
    struct Panel {
        var title: String
        var expressions: [(refID: String, expr: String)]
    }

    struct Variable {
        var name: String
        var query: String
    }

    var panels: [Panel]
    var variables: [Variable]

    init(json: Data) throws {
        guard let root = try JSONSerialization.jsonObject(with: json) as? [String: Any] else { throw TestFailure("the dashboard is not a JSON object") }
        func flatten(_ panels: [[String: Any]]) -> [[String: Any]] {
            panels.flatMap { [$0] + flatten($0["panels"] as? [[String: Any]] ?? []) }
        }
        panels = flatten(root["panels"] as? [[String: Any]] ?? []).filter { $0["type"] as? String != "row" }.map { panel in
            let targets = panel["targets"] as? [[String: Any]] ?? []
            return Panel(title: panel["title"] as? String ?? "(untitled)",
                         expressions: targets.map { (refID: $0["refId"] as? String ?? "?", expr: $0["expr"] as? String ?? "") })
        }
        let templating = (root["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        variables = templating.filter { $0["type"] as? String == "query" }.map { variable in
            Variable(name: variable["name"] as? String ?? "", query: variable["query"] as? String ?? "")
        }
    }

    /// The same dashboard with the expressions of the panel titled `title` passed through `edit`.
    /// - Throws: when no panel has that title or `edit` changes nothing (a control that tests nothing).
    func editing(panel title: String, _ edit: (String) -> String) throws -> GrafanaDashboard {
        var copy = self
        guard let index = panels.firstIndex(where: { $0.title == title }) else { throw TestFailure("no panel titled \(title)") }
        copy.panels[index].expressions = panels[index].expressions.map { (refID: $0.refID, expr: edit($0.expr)) }
        guard copy.panels[index].expressions.map(\.expr) != panels[index].expressions.map(\.expr) else {
            throw TestFailure("editing \(title) changed none of its expressions")
        }
        return copy
    }
}

/// Evaluates a dashboard as Grafana would: each query variable first (`label_values(selector, label)` is
/// `count by (label) (selector)`; its values, as Grafana formats several for a regex matcher, go into what
/// follows), then every panel query as an instant query, which must answer with a number (not only NaN).
/// Every metric a query names must also be in `exported`.
private struct DashboardCheck {
    struct Problem: CustomStringConvertible {
        var panel: String
        var message: String
        var description: String { "\(panel): \(message)" }
    }

    let prometheus: Prometheus
    /// The metric names of the relays' `/metrics`.
    let exported: Set<String>
    /// Grafana's own variables. `$__rate_interval` is at least four scrape intervals; 1 m is its value for a
    /// data source with Grafana's default of 15 s, and it spans this whole test's traffic.
    static let builtins = ["__rate_interval": "1m", "__interval": "15s", "__range": "1h"]

    /// - Throws: when Prometheus does not answer (a refused expression is a problem, not a throw).
    func problems(_ dashboard: GrafanaDashboard) throws -> [Problem] {
        var problems: [Problem] = []
        var values = Self.builtins
        for variable in dashboard.variables {
            let query = substitute(variable.query, values)
            guard let match = query.wholeMatch(of: /label_values\((.+),\s*(\w+)\)/) else {
                problems.append(Problem(panel: "variable \(variable.name)", message: "not label_values(selector, label): \(query)"))
                continue
            }
            let (selector, label) = (String(match.1), String(match.2))
            let metric = String(selector.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" })
            if !exported.contains(metric) {
                problems.append(Problem(panel: "variable \(variable.name)", message: "reads \(metric), which no relay exports"))
            }
            let listed = try? prometheus.samples("count by (\(label)) (\(selector))").compactMap { $0.labels[label] }.filter { !$0.isEmpty }
            guard let listed, !listed.isEmpty else {
                problems.append(Problem(panel: "variable \(variable.name)", message: "lists no values: \(query)"))
                continue
            }
            values[variable.name] = "(" + Set(listed).sorted().map(Self.regexEscaped).joined(separator: "|") + ")"
        }
        let queries = dashboard.panels.flatMap { panel in
            panel.expressions.map { (panel: panel.title, refID: $0.refID, expr: substitute($0.expr, values)) }
        }
        for panel in dashboard.panels where panel.expressions.isEmpty {
            problems.append(Problem(panel: panel.title, message: "has no query"))
        }
        for (query, answer) in zip(queries, try prometheus.samples(queries.map(\.expr))) {
            let report = { (message: String) in
                problems.append(Problem(panel: query.panel, message: "query \(query.refID) \(message): \(query.expr)"))
            }
            if query.expr.contains("$") { report("has a variable the dashboard does not define") }
            problems += unexported(in: query.expr, where: query.panel)
            switch answer {
            case .failure(let error): report("Prometheus refuses (\(error))")
            case .success(let samples) where samples.isEmpty: report("answers nothing")
            case .success(let samples) where samples.allSatisfy({ $0.value == "NaN" }): report("answers only NaN")
            case .success: break
            }
        }
        return problems
    }

    /// A problem for each metric `expr` names (a name before `{`) that no relay exports, or for naming none.
    private func unexported(in expr: String, where place: String) -> [Problem] {
        let names = expr.matches(of: /([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{/).map { String($0.1) }
        if names.isEmpty { return [Problem(panel: place, message: "names no metric (each selector needs {…}): \(expr)")] }
        return names.filter { !exported.contains($0) }.map {
            Problem(panel: place, message: "reads \($0), which no relay exports")
        }
    }

    /// `$name` and `${name}` replaced by their values; unknown ones left as they are.
    private func substitute(_ text: String, _ values: [String: String]) -> String {
        text.replacing(/\$\{(\w+)\}|\$(\w+)/) { match in
            let name = String(match.1 ?? match.2 ?? "")
            return values[name] ?? String(match.0)
        }
    }

    /// A label value as a regex inside a PromQL string, as Grafana escapes one (`127\\.0\\.0\\.1:9090`).
    private static func regexEscaped(_ value: String) -> String {
        var out = ""
        for character in value {
            if #"\.+*?^$()[]{}|"#.contains(character) { out += #"\\"# }
            out.append(character)
        }
        return out
    }
}
