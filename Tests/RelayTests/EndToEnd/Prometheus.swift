import Foundation
import TestSupport

/// A Prometheus server for one test (Debian's `/usr/bin/prometheus`, on 127.0.0.1): 1 s scrapes of the relays
/// on `targets` (job `apns-relay`, with `labels` on every series as Kubernetes service discovery would add
/// them) and 1 s evaluations of the rule files given.
final class Prometheus: Sendable {
    struct Alert: CustomStringConvertible {
        var name: String
        var state: String
        var labels: [String: String]
        var description: String { "\(name) \(state) \(labels)" }
    }

    /// One series of an instant query's answer (a scalar answer is one series without labels).
    struct Sample: CustomStringConvertible {
        var labels: [String: String]
        /// As Prometheus writes it: a number, `NaN`, `+Inf` or `-Inf`.
        var value: String
        var description: String { "\(labels) \(value)" }
    }

    /// An expression Prometheus refused (a parse or evaluation error), with its words.
    struct QueryError: Error, CustomStringConvertible {
        var type: String
        var message: String
        var description: String { "\(type): \(message)" }
    }

    static let executable = "/usr/bin/prometheus"
    /// The scrape job of every target.
    static let job = "apns-relay"

    let process: Process
    let port: Int

    private init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    /// Starts Prometheus in `directory` (its configuration and data go there) and waits until it is ready.
    /// - Parameter ruleFiles: names of rule files in `directory`.
    static func start(
        in directory: URL, scraping targets: [Int], labels: [String: String] = [:], ruleFiles: [String] = []
    ) async throws -> Prometheus {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestFailure("\(executable) is missing: make test installs Debian's prometheus package (apt-get install prometheus)")
        }
        let port = try freeLocalPort()
        let data = directory.appendingPathComponent("data-\(UUID().uuidString.prefix(8))").path
        let configuration = directory.appendingPathComponent("prometheus-\(port).yml")
        let quoted = { (text: String) in "\"\(text)\"" }
        let targetList = targets.map { quoted("127.0.0.1:\($0)") }.joined(separator: ", ")
        let labelList = labels.sorted { $0.key < $1.key }.map { "\($0.key): \(quoted($0.value))" }.joined(separator: ", ")
        try """
            global: { scrape_interval: 1s, evaluation_interval: 1s }
            rule_files: [\(ruleFiles.map(quoted).joined(separator: ", "))]
            scrape_configs:
              - job_name: \(job)
                static_configs: [{ targets: [\(targetList)], labels: {\(labelList)} }]
            """.write(to: configuration, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--config.file=\(configuration.path)", "--storage.tsdb.path=\(data)", "--web.listen-address=127.0.0.1:\(port)",
            "--log.level=warn",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try startProcess(process)
        let prometheus = Prometheus(process: process, port: port)
        try await eventually("Prometheus ready on port \(port)", within: .seconds(30), every: .milliseconds(100)) {
            try await http("http://127.0.0.1:\(port)/-/ready").status == 200
        }
        return prometheus
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }

    /// The `data` of an API answer; throws `QueryError` for an answer with status `error`.
    /// Blocking: the Prometheus checks run in the suites that run alone (see the Makefile), not beside the
    /// parallel suite's waits.
    private func json(_ path: String) throws -> [String: Any] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-s", "-m", "10", "http://127.0.0.1:\(port)\(path)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try startProcess(process)
        let body = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return try data(of: body, path)
    }

    private func data(of body: String, _ path: String) throws -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
            throw TestFailure("Prometheus \(path): \(body)")
        }
        if object["status"] as? String == "error" {
            throw QueryError(type: object["errorType"] as? String ?? "", message: object["error"] as? String ?? body)
        }
        guard object["status"] as? String == "success", let data = object["data"] as? [String: Any] else {
            throw TestFailure("Prometheus \(path): \(body)")
        }
        return data
    }

    func alerts() throws -> [Alert] {
        (try json("/api/v1/alerts")["alerts"] as? [[String: Any]] ?? []).map { alert in
            let labels = alert["labels"] as? [String: String] ?? [:]
            return Alert(name: labels["alertname"] ?? "", state: alert["state"] as? String ?? "", labels: labels)
        }
    }

    /// Every series of an instant query's answer (none for an expression that matches nothing).
    /// - Throws: `QueryError` when Prometheus refuses the expression.
    func samples(_ expression: String) throws -> [Sample] {
        try samples([expression])[0].get()
    }

    /// The answers to instant queries, in their order, all fetched by one curl: a dashboard's queries cost
    /// one process, not one each. Prometheus writes each answer on one line (its JSON escapes newlines).
    /// - Throws: when an answer is missing or not Prometheus's JSON (a refused expression is a `QueryError` result).
    func samples(_ expressions: [String]) throws -> [Result<[Sample], QueryError>] {
        let paths = expressions.map { "/api/v1/query?query=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-s", "-m", "10", "-w", "\n%{http_code}\n"] + paths.map { "http://127.0.0.1:\(port)\($0)" }
        let pipe = Pipe()
        process.standardOutput = pipe
        try startProcess(process)
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 2 * paths.count else { throw TestFailure("Prometheus answered \(lines.count / 2) of \(paths.count) queries") }
        return try paths.indices.map { index in
            do {
                return .success(try samples(in: try data(of: String(lines[2 * index]), paths[index]), expressions[index]))
            } catch let error as QueryError {
                return .failure(error)
            }
        }
    }

    private func samples(in data: [String: Any], _ expression: String) throws -> [Sample] {
        switch data["resultType"] as? String {
        case "vector"?:
            return (data["result"] as? [[String: Any]] ?? []).map { series in
                let value = series["value"] as? [Any] ?? []
                return Sample(labels: series["metric"] as? [String: String] ?? [:], value: value.last as? String ?? "")
            }
        case "scalar"?:
            let value = data["result"] as? [Any] ?? []
            return [Sample(labels: [:], value: value.last as? String ?? "")]
        case let other:
            throw TestFailure("Prometheus answered \(expression) with a \(other ?? "missing") result type")
        }
    }

    /// The value of an instant query with one result.
    func query(_ expression: String) throws -> Double? {
        let samples = try samples(expression)
        guard samples.count == 1 else { return nil }
        return Double(samples[0].value)
    }

    /// When the rule group was last evaluated, in seconds since the epoch (Prometheus's clock).
    func lastEvaluation() throws -> Double {
        let groups = try json("/api/v1/rules")["groups"] as? [[String: Any]] ?? []
        guard let text = groups.first?["lastEvaluation"] as? String else { throw TestFailure("no rule group evaluated yet") }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard let date = formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text) else {
            throw TestFailure("lastEvaluation \(text)")
        }
        return date.timeIntervalSince1970
    }
}
