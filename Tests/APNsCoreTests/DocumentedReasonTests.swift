import TestSupport
import Testing
@testable import APNsCore

/// APNsCore's reason table (`APNsReason`, its `status`) and decision table (`DeliveryDecision(response:)`)
/// against the specification's, written out in `DocumentedReason`.
@Suite struct DocumentedReasonTests {
    /// A 410 answer's `timestamp`, to see it travel into the decision.
    static let invalidatedAt: Int64 = 1_700_000_000_123

    @Test(arguments: DocumentedReason.all.filter { $0.source != .unconfirmed })
    func everyConfirmedReasonDecodesAndCarriesItsDocumentedStatus(_ row: DocumentedReason) {
        let reason = APNsReason(rawValue: row.reason)
        #expect(reason != .unknown(row.reason), "APNsCore does not know \(row.reason)")
        #expect(reason.rawValue == row.reason)
        #expect(reason.status == row.status, "\(row.reason): APNsCore says \(reason.status.map(String.init) ?? "nil")")
    }

    /// Every row, confirmed or not: an unconfirmed reason APNsCore does not know still gets the handling its
    /// status calls for, and is kept verbatim.
    @Test(arguments: DocumentedReason.all)
    func everyDocumentedAnswerGetsTheDocumentedDecision(_ row: DocumentedReason) {
        let reason = APNsReason(rawValue: row.reason)
        #expect(reason.rawValue == row.reason, "the reason string is kept verbatim")
        let timestamp: Int64? = row.status == 410 ? Self.invalidatedAt : nil
        let decision = DeliveryDecision(response: APNsResponse(status: row.status, reason: reason, timestamp: timestamp))
        #expect(decision == row.handling.decision(invalidatedAt: timestamp), "\(row)")
    }

    /// Nothing APNsCore knows is missing from the specification's table, and the table names each reason once.
    @Test func everyReasonAPNsCoreKnowsIsDocumented() {
        let documented = DocumentedReason.all.map(\.reason)
        #expect(documented.count == Set(documented).count, "a reason appears twice in the table")
        for reason in APNsReason.allKnown {
            #expect(DocumentedReason.named(reason.rawValue) != nil, "\(reason) is not in the specification's table")
        }
    }
}
