import APNsCore
import APNsMock
import TestSupport
import Testing
@testable import APNsClient

/// A connection near the end of its HTTP/2 stream ids retires and is replaced; nothing fails. (With ids used
/// up, nghttp2 refuses every new request on the connection, which the pool then saw as the least loaded one.)
@Suite(.timeLimit(.minutes(2)))
struct StreamIDRetirementTests {
    @Test func connectionsRetireBeforeTheirStreamIDsRunOut() async throws {
        let mock = try await MockFixture.start()
        // Stream ids 1, 3, …, 199: a hundred requests per connection, then a new connection.
        let client = try mock.client { $0.connection.maxStreamID = 199; $0.pool.maxConnections = 4 }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<1000 { group.addTask { try await client.send(try MockFixture.notification(i), timeout: .seconds(60)).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 1000 && statuses.allSatisfy { $0 == 200 }, "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))")
        let perConnection = mock.server.statistics.requestsByConnection
        #expect(perConnection.values.allSatisfy { $0 <= 100 }, "a connection carried more than its 100 stream ids: \(perConnection)")
        #expect(perConnection.count >= 10, "\(perConnection.count) connections")
        #expect(mock.server.statistics.accepted == 1000)
        await client.shutdown()
        await mock.stop()
    }
}
