import Foundation

/// The package's executables as `swift build` left them, for tests that run them as users do.
///
/// A product is looked for, in order: `$APNS_RELAY_BINARY`'s folder (set to run the tests against another
/// build, e.g. a release one); the folder of the running test binary (`swift build --build-tests` puts every
/// product there, e.g. `.build/debug/`) and the one above it; `.build/debug/` under the checkout.
package enum BuiltProducts {
    private static let checkout = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The folders looked in, in order.
    package static var folders: [URL] {
        var folders: [URL] = []
        if let relay = ProcessInfo.processInfo.environment["APNS_RELAY_BINARY"] {
            folders.append(URL(fileURLWithPath: relay).deletingLastPathComponent())
        }
        let test = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        folders += [test, test.deletingLastPathComponent(), checkout.appendingPathComponent(".build/debug")]
        return folders
    }

    /// The executable `name` (`apns-relay`, `apns-mock`, `apns-client-tool`), or `nil` when it is not built.
    package static func find(_ name: String) -> URL? {
        if name == "apns-relay", let relay = ProcessInfo.processInfo.environment["APNS_RELAY_BINARY"] {
            return URL(fileURLWithPath: relay)
        }
        return folders.map { $0.appendingPathComponent(name) }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// The executable `name`. - Throws: `TestFailure` naming where it looked.
    package static func executable(_ name: String) throws -> URL {
        guard let found = find(name) else {
            throw TestFailure("\(name) is not built (build it with `swift build`); looked in \(folders.map(\.path))")
        }
        return found
    }
}
