import APNsCore
import APNsMock
import TestSupport
import Testing

extension DocumentedReason {
    /// The specification's row for `reason`: what the mock must answer is looked up here, never in
    /// APNsCore's `APNsReason.status`, which the mock answers from.
    static func row(for reason: APNsReason) throws -> DocumentedReason {
        try #require(named(reason.rawValue), "\(reason) is not in the specification's table (DocumentedReason)")
    }
}

extension MockStatistics {
    /// Answers the mock counted with the row's documented status and reason.
    func count(_ row: DocumentedReason) -> Int { responses["\(row.status) \(row.reason)"] ?? 0 }
}
