import Foundation
import Testing

/// README.md's metrics table names every series the relay can export, and only those.
///
/// The series are read from the sources: every swift-metrics instrument is created with a literal label
/// (`Counter(label: "…")`, `Gauge`, `Timer`, `Recorder`), and this test also refuses a non-literal one, so a
/// new series cannot slip past it. (Scraping `/metrics` after a run would miss series that appear only on
/// rare events, such as the token-removal guard tripping.)
@Suite struct DocumentedMetricsTests {
    /// Every label an instrument is created with under Sources/.
    private func exportedSeries() throws -> Set<String> {
        let sources = Checkout.root.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        var series: Set<String> = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: #/(?:Counter|FloatingPointCounter|Gauge|Meter|Recorder|Timer)\(label:\s*("?)([^",)]*)/#) {
                #expect(match.output.1 == "\"", "\(file.lastPathComponent): a metric label that is not a string literal (\(match.output.0)); this test could not see its name")
                series.insert(String(match.output.2))
            }
        }
        return series
    }

    /// The series README.md's `## Metrics` table names (a cell may list several, with `{labels}`).
    private func documentedSeries() throws -> Set<String> {
        let readme = try String(contentsOf: Checkout.root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = readme.range(of: "\n## Metrics\n") else { return [] }
        let section = readme[start.upperBound...].prefix { _ in true }
        var names: Set<String> = []
        var seenTable = false
        for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") { break }
            guard line.hasPrefix("| `") else { if seenTable && !line.hasPrefix("|") { break } else { continue } }
            seenTable = true
            let cell = line.split(separator: "|")[0]
            for name in cell.matches(of: #/`([a-z_]+)(?:\{[^}]*\})?`/#) { names.insert(String(name.output.1)) }
        }
        return names
    }

    @Test func readmeMetricsTableMatchesTheSeriesTheRelayExports() throws {
        let exported = try exportedSeries()
        let documented = try documentedSeries()
        #expect(exported.count > 25, "found the instruments: \(exported.sorted())")
        for name in exported.subtracting(documented).sorted() {
            Issue.record("\(name) is exported but missing from README.md's metrics table")
        }
        for name in documented.subtracting(exported).sorted() {
            Issue.record("README.md's metrics table names \(name), which the relay does not export")
        }
    }
}

/// README.md's table of apns-mock's control interface names every endpoint the mock serves.
@Suite struct DocumentedMockControlTests {
    @Test func readmeListsEveryControlEndpoint() throws {
        let source = try String(contentsOf: Checkout.root.appendingPathComponent("Sources/APNsMock/MockControlServer.swift"), encoding: .utf8)
        let endpoints = Set(source.matches(of: #/case \(\.(GET|POST), "(/[a-z-]+)"\)/#).map { "\($0.output.1) \($0.output.2)" })
        #expect(endpoints.count >= 8, "\(endpoints)")
        let readme = try String(contentsOf: Checkout.root.appendingPathComponent("README.md"), encoding: .utf8)
        let documented = Set(readme.matches(of: #/`(GET|POST) (/[a-z-]+)`/#).map { "\($0.output.1) \($0.output.2)" })
        for endpoint in endpoints.subtracting(documented).sorted() {
            Issue.record("apns-mock serves \(endpoint), which README.md's control table does not list")
        }
        for endpoint in documented.subtracting(endpoints).sorted() {
            Issue.record("README.md lists \(endpoint), which apns-mock does not serve")
        }
    }
}
