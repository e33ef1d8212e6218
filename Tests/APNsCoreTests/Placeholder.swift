import Testing
@testable import APNsCore

@Test func moduleBuilds() {}
