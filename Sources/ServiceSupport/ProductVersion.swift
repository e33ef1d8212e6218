/// The release of apns-relay (and of its `apns-mock`), as `--version` prints it. The chart's `appVersion`
/// says the same (a test keeps them equal); change both together when releasing.
package enum ProductVersion {
    package static let string = "0.3.0"
}
