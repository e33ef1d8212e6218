/// A variable the kubelet sets for a Service (`enableServiceLinks`, on by default): every pod in a namespace
/// gets these for every Service in it, so a Service named `apns-relay` (the natural release name) or
/// `apns-relay-anything` puts `APNS_RELAY_…` variables into the relay's environment that are not its
/// configuration.
///
/// Recognised only in their exact shape — the name *and* the value the kubelet writes — so that a misspelt
/// configuration key (`APNS_RELAY_KAFKA_BOOTSTRAP_SERVERZ`) is still refused:
///
/// | name | value |
/// |---|---|
/// | `<SVC>_SERVICE_HOST` | an IP address |
/// | `<SVC>_SERVICE_PORT`, `<SVC>_SERVICE_PORT_<PORT NAME>` | a port number |
/// | `<SVC>_PORT`, `<SVC>_PORT_<n>_<PROTO>` | `tcp://<ip>:<n>` (or `udp`, `sctp`) |
/// | `<SVC>_PORT_<n>_<PROTO>_PROTO` | `tcp`, `udp` or `sctp` |
/// | `<SVC>_PORT_<n>_<PROTO>_PORT` | `<n>` |
/// | `<SVC>_PORT_<n>_<PROTO>_ADDR` | an IP address |
///
/// `<SVC>` is the Service's name upper-cased with `-` as `_` (Kubernetes `pkg/kubelet/envvars`).
package struct ServiceLinkVariable: Sendable, Equatable {
    /// The Service's name as it appears in the variable (`APNS_RELAY`, `APNS_RELAY_EXTRA`).
    package var service: String

    private static let protocols = ["TCP", "UDP", "SCTP"]

    /// The variable's service-link reading, or `nil` when `name` and `value` are not exactly one.
    package init?(name: String, value: String) {
        // A Service's name is a DNS label (`a-z`, `0-9`, `-`), so its variables' names hold these only.
        guard !name.isEmpty, name.allSatisfy({ $0 == "_" || $0.isServiceNameCharacter }) else { return nil }
        let parts = name.split(separator: "_", omittingEmptySubsequences: false).map(String.init)
        // Longest suffix first: `_PORT_9090_TCP_PORT` also ends in `_PORT`.
        for (length, matches) in Self.shapes(parts: parts, value: value) where parts.count > length && matches {
            let service = parts.dropLast(length).joined(separator: "_")
            guard service.first?.isServiceNameCharacter == true else { continue }
            self.service = service
            return
        }
        return nil
    }

    /// (number of trailing name parts, whether those parts and the value have that shape), longest first but for a
    /// named port's, whose length varies (no two shapes can both match one name and value).
    private static func shapes(parts: [String], value: String) -> [(Int, Bool)] {
        func tail(_ count: Int) -> ArraySlice<String> { parts.suffix(count) }
        func isPort(_ text: String) -> Bool {
            text.allSatisfy(\.isASCIIDigitCharacter) && Int(text).map { (1...65_535).contains($0) && String($0) == text } == true
        }
        func isServicePort(_ number: String, _ proto: String) -> Bool { isPort(number) && protocols.contains(proto) }
        /// `tcp://10.0.0.1:9090`, `tcp://[fd00::1]:9090`; with `number`, that port exactly.
        func isPortURL(_ text: String, proto: String?, number: String?) -> Bool {
            guard let separator = text.range(of: "://") else { return false }
            let scheme = String(text[..<separator.lowerBound])
            guard protocols.contains(scheme.uppercased()), scheme == scheme.lowercased(), proto.map({ $0 == scheme.uppercased() }) ?? true,
                  let colon = text.lastIndex(of: ":"), colon > separator.upperBound
            else { return false }
            var host = String(text[separator.upperBound..<colon])
            let port = String(text[text.index(after: colon)...])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            return IPAddressText.isAddress(host) && isPort(port) && number.map { $0 == port } ?? true
        }
        let count = parts.count
        let last = parts[count - 1]
        var shapes: [(Int, Bool)] = []
        if count >= 4, ["PROTO", "PORT", "ADDR"].contains(last), tail(4).first == "PORT" {
            let number = parts[count - 3], proto = parts[count - 2]
            let valueFits = switch last {
            case "PROTO": value == proto.lowercased()
            case "PORT": value == number
            default: IPAddressText.isAddress(value)
            }
            shapes.append((4, isServicePort(number, proto) && valueFits))
        }
        if count >= 3, tail(3).first == "PORT" {
            shapes.append((3, isServicePort(parts[count - 2], last) && isPortURL(value, proto: last, number: parts[count - 2])))
        }
        // A port's name may hold `-` (`web-ui` → `WEB_UI`): the tail starts at the first `SERVICE_PORT`.
        if let start = parts.indices.dropLast(2).first(where: { parts[$0] == "SERVICE" && parts[$0 + 1] == "PORT" }) {
            shapes.append((count - start, isPort(value)))
        }
        if count >= 2, parts[count - 2] == "SERVICE" {
            switch last {
            case "HOST": shapes.append((2, IPAddressText.isAddress(value)))
            case "PORT": shapes.append((2, isPort(value)))
            default: break
            }
        }
        if last == "PORT" {
            shapes.append((1, isPortURL(value, proto: nil, number: nil)))
        }
        return shapes
    }
}

/// The text of an IPv4 or IPv6 address, as the kubelet writes a Service's cluster IP.
enum IPAddressText {
    static func isAddress(_ text: String) -> Bool { isIPv4(text) || isIPv6(text) }

    static func isIPv4(_ text: String) -> Bool {
        let octets = text.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets.allSatisfy { octet in
            (1...3).contains(octet.count) && octet.allSatisfy(\.isASCIIDigitCharacter) && Int(octet).map { $0 <= 255 } == true
        }
    }

    static func isIPv6(_ text: String) -> Bool {
        guard text.contains(":"), text.count <= 45 else { return false }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return false }
        var groups = 0
        for (index, half) in halves.enumerated() where !half.isEmpty {
            let fields = half.split(separator: ":", omittingEmptySubsequences: false)
            for (position, field) in fields.enumerated() {
                // An embedded IPv4 address may end the last half (`::ffff:10.0.0.1`).
                if index == halves.count - 1, position == fields.count - 1, isIPv4(String(field)) {
                    groups += 2
                    continue
                }
                guard (1...4).contains(field.count), field.allSatisfy(\.isHexDigit) else { return false }
                groups += 1
            }
        }
        return halves.count == 2 ? groups < 8 : groups == 8
    }
}

extension Character {
    fileprivate var isServiceNameCharacter: Bool { ("A"..."Z").contains(self) || isASCIIDigitCharacter }
    fileprivate var isASCIIDigitCharacter: Bool { ("0"..."9").contains(self) }
}
