import Foundation
import Relay

extension SettingsReader {
    /// Records a problem for every key a source holds that no part of the configuration read or declared:
    /// a misspelt key (`relay.retry.maxAttnempts`) would otherwise leave its setting at the default without
    /// a word. Call after everything was read, so that keys under named credentials are known.
    ///
    /// - Parameter credentials: the names `apns.credentials` lists (keys under any other name are unknown).
    func checkUnknownKeys(credentials: [String]) {
        let known = self.known
        let prefix = ConfigurationSources.environmentPrefix
        let credentialHint = credentials.isEmpty
            ? "apns.credentials lists no credential"
            : "apns.credentials lists \(credentials.joined(separator: ", "))"

        if let file = sources.file {
            for (key, value) in file.values.sorted(by: { $0.key < $1.key }) where !known.contains(key) {
                // A mapping is a section: its keys are checked one by one (an empty one is reported itself).
                if value == .mapping, file.values.keys.contains(where: { $0.hasPrefix(key + ".") }) { continue }
                // Under a known key: that key's own check already said a mapping is the wrong type.
                if Self.ancestors(of: key).contains(where: known.contains) { continue }
                problem("unknown configuration key '\(key)' in \(file.path)" + explanation(key, known: known, credentialHint: credentialHint))
            }
        }

        let knownVariables = Dictionary(known.map { (RelayAppConfiguration.environmentName(forKey: $0), $0) }, uniquingKeysWith: { first, _ in first })
        for name in sources.environment.keys.sorted() where knownVariables[name] == nil {
            // The kubelet's variables for a Service named apns-relay(-…): not ours, and not a typo of ours.
            if let value = sources.environment[name], ServiceLinkVariable(name: prefix + name, value: value) != nil {
                ignoredVariables.append(prefix + name)
                continue
            }
            var message = "unknown environment variable \(prefix)\(name)"
            if let close = Self.closest(to: name, among: knownVariables.keys) {
                message += "; did you mean \(prefix)\(close) (\(knownVariables[close] ?? close))?"
            } else if name.hasPrefix("APNS_CREDENTIAL_") {
                message += " (keys of named credentials need the name listed in apns.credentials; \(credentialHint))"
            }
            problem(message)
        }

        for key in sources.overrides.keys.sorted() where !known.contains(key) {
            problem("unknown configuration key '\(key)' (from --set)" + explanation(key, known: known, credentialHint: credentialHint))
        }
    }

    /// "; did you mean …?", or why a key under a credential name is unknown, or nothing.
    private func explanation(_ key: String, known: Set<String>, credentialHint: String) -> String {
        let parts = key.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count > 3, parts[0] == "apns", parts[1] == "credential", !known.contains(where: { $0.hasPrefix("apns.credential.\(parts[2]).") }) {
            return ": credential '\(parts[2])' is not listed in apns.credentials (\(credentialHint))"
        }
        if let close = Self.closest(to: key, among: known) { return "; did you mean '\(close)'?" }
        // A right name in the wrong section (kafka.maxInFlightEvents for relay.maxInFlightEvents).
        if let last = parts.last, let moved = known.sorted().first(where: { $0.split(separator: ".").last == last }) {
            return "; did you mean '\(moved)'?"
        }
        return ""
    }

    /// `a.b.c` → `a`, `a.b`.
    static func ancestors(of key: String) -> [String] {
        let parts = key.split(separator: ".")
        return (1..<max(1, parts.count)).map { parts.prefix($0).joined(separator: ".") }
    }

    /// The candidate nearest to `name` by edit distance (ignoring case), if it is near enough to be a typo.
    static func closest(to name: String, among candidates: some Sequence<String>) -> String? {
        let target = Array(name.lowercased())
        let limit = max(2, target.count / 6)
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(target, Array(candidate.lowercased()))
            if distance <= limit, distance < best?.1 ?? .max || (distance == best?.1 && candidate < best!.0) {
                best = (candidate, distance)
            }
        }
        return best?.0
    }

    /// Levenshtein distance: insertions, deletions and substitutions each cost one.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
