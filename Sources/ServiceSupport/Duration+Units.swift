/// A `Duration` as a plain number, for C APIs, metrics and arithmetic. `package`: for this package's
/// targets only, never an extension of a standard type that importers of our libraries would see.
package extension Duration {
    /// In seconds, to the attosecond.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Whole milliseconds (truncated toward zero).
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// Whole nanoseconds (truncated toward zero).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
