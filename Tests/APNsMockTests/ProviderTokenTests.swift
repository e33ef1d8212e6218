import APNsCore
import APNsMock
import Crypto
import TestSupport
import Testing

@Suite struct ProviderTokenTests {
    func send(_ fixture: MockFixture, _ client: TestHTTP2Client, token: String) async throws -> TestResponse {
        try await client.send(fixture.request([("authorization", "bearer " + token)]))
    }

    @Test func acceptsValidRawAndDERSignatures() async throws {
        let fixture = try await MockFixture.start()
        let raw = try await send(fixture, try await fixture.connect(), token: fixture.key.token(issuedAt: fixture.clock.nowSeconds))
        #expect(raw.status == 200)
        let der = try await send(fixture, try await fixture.connect(), token: fixture.key.token(issuedAt: fixture.clock.nowSeconds - 5, der: true))
        #expect(der.status == 200)
        await fixture.stop()
    }

    @Test func rejectsWrongSignatureUnknownKidAndWrongTeam() async throws {
        let fixture = try await MockFixture.start()
        let now = fixture.clock.nowSeconds
        let forged = fixture.key.token(issuedAt: now, signWith: P256.Signing.PrivateKey())
        let wrong = try await send(fixture, try await fixture.connect(), token: forged)
        #expect(wrong.status == 403 && wrong.reason == "InvalidProviderToken")

        let stranger = TestSigningKey(keyID: "UNKNOWNKID", teamID: "TEAM000001")
        let unknown = try await send(fixture, try await fixture.connect(), token: stranger.token(issuedAt: now))
        #expect(unknown.status == 403 && unknown.reason == "InvalidProviderToken")

        // iss must be the key's team.
        let mislabelled = TestSigningKey(keyID: fixture.key.keyID, teamID: "TEAM000009", privateKey: fixture.key.privateKey)
        let team = try await send(fixture, try await fixture.connect(), token: mislabelled.token(issuedAt: now))
        #expect(team.status == 403 && team.reason == "InvalidProviderToken")
        #expect(fixture.server.acceptedNotifications.isEmpty)
        await fixture.stop()
    }

    @Test func rejectsTokenOlderThanOneHour() async throws {
        let fixture = try await MockFixture.start()
        let client = try await fixture.connect()
        let token = fixture.key.token(issuedAt: fixture.clock.nowSeconds)
        #expect(try await send(fixture, client, token: token).status == 200)
        fixture.clock.advance(by: .seconds(3601))
        let expired = try await send(fixture, client, token: token)
        #expect(expired.status == 403 && expired.reason == "ExpiredProviderToken")
        let old = try await send(fixture, try await fixture.connect(), token: token)
        #expect(old.reason == "ExpiredProviderToken")
        await fixture.stop()
    }

    @Test func bindsConnectionToTeamAndKeyOfFirstPush() async throws {
        let fixture = try await MockFixture.start()
        let client = try await fixture.connect()
        let now = fixture.clock.nowSeconds
        #expect(try await send(fixture, client, token: fixture.key.token(issuedAt: now)).status == 200)
        fixture.clock.advance(by: .seconds(21 * 60))
        let sameTeam = try await send(fixture, client, token: fixture.otherKeySameTeam.token(issuedAt: fixture.clock.nowSeconds))
        #expect(sameTeam.status == 403 && sameTeam.reason == "UnrelatedKeyIdInToken")
        let otherTeam = try await send(fixture, client, token: fixture.otherTeamKey.token(issuedAt: fixture.clock.nowSeconds))
        #expect(otherTeam.status == 403 && otherTeam.reason == "InvalidProviderToken")
        // A fresh token of the bound key, 21 minutes later, is fine.
        #expect(try await send(fixture, client, token: fixture.key.token(issuedAt: fixture.clock.nowSeconds)).status == 200)
        await fixture.stop()
    }

    @Test func rejectsTokenChurnOnOneConnection() async throws {
        let fixture = try await MockFixture.start()
        let client = try await fixture.connect()
        let start = fixture.clock.nowSeconds
        let first = fixture.key.token(issuedAt: start)
        #expect(try await send(fixture, client, token: first).status == 200)
        fixture.clock.advance(by: .seconds(60))
        let churn = try await send(fixture, client, token: fixture.key.token(issuedAt: start + 60))
        #expect(churn.status == 429 && churn.reason == "TooManyProviderTokenUpdates")
        // The old token still works; the change is allowed once 20 minutes have passed.
        #expect(try await send(fixture, client, token: first).status == 200)
        fixture.clock.advance(by: .seconds(19 * 60))
        #expect(try await send(fixture, client, token: fixture.key.token(issuedAt: start + 60)).status == 200)
        // Another connection may start with any token.
        #expect(try await send(fixture, try await fixture.connect(), token: fixture.key.token(issuedAt: start + 120)).status == 200)
        #expect(fixture.server.statistics.count(.tooManyProviderTokenUpdates) == 1)
        await fixture.stop()
    }

    @Test func strictFleetRejectsSecondTokenOfSameKeyWithin20Minutes() async throws {
        let fixture = try await MockFixture.start { $0.strictFleet = true }
        let start = fixture.clock.nowSeconds
        let shared = fixture.key.token(issuedAt: start)
        #expect(try await send(fixture, try await fixture.connect(), token: shared).status == 200)
        // A replica that minted its own token a minute later is caught, on a fresh connection.
        let own = try await send(fixture, try await fixture.connect(), token: fixture.key.token(issuedAt: start + 60))
        #expect(own.status == 429 && own.reason == "TooManyProviderTokenUpdates")
        // The shared token works on any number of connections.
        #expect(try await send(fixture, try await fixture.connect(), token: shared).status == 200)
        // Other keys are independent; a token 20 minutes later is a legitimate rotation.
        #expect(try await send(fixture, try await fixture.connect(), token: fixture.otherKeySameTeam.token(issuedAt: start + 60)).status == 200)
        fixture.clock.advance(by: .seconds(20 * 60))
        #expect(try await send(fixture, try await fixture.connect(), token: fixture.key.token(issuedAt: start + 20 * 60)).status == 200)
        await fixture.stop()
    }

    @Test func rejectsKeyRestrictedToTheOtherEnvironment() async throws {
        let sandboxOnly = TestSigningKey(keyID: "KEYSANDBOX", teamID: "TEAM000001")
        let fixture = try await MockFixture.start {
            $0.providerKeys.append(ProviderKey(keyID: sandboxOnly.keyID, teamID: sandboxOnly.teamID,
                                               publicKey: sandboxOnly.privateKey.publicKey, environment: .development))
        }
        let response = try await send(fixture, try await fixture.connect(), token: sandboxOnly.token(issuedAt: fixture.clock.nowSeconds))
        #expect(response.status == 403 && response.reason == "BadEnvironmentKeyInToken")
        await fixture.stop()
    }

    @Test func rejectsTopicOutsideATopicSpecificKey() async throws {
        let narrow = TestSigningKey(keyID: "KEYNARROW1", teamID: "TEAM000001")
        let fixture = try await MockFixture.start {
            $0.providerKeys.append(ProviderKey(keyID: narrow.keyID, teamID: narrow.teamID,
                                               publicKey: narrow.privateKey.publicKey, bundleIDs: ["com.example.other"]))
        }
        let response = try await send(fixture, try await fixture.connect(), token: narrow.token(issuedAt: fixture.clock.nowSeconds))
        #expect(response.status == 403 && response.reason == "InvalidProviderToken")
        await fixture.stop()
    }

    @Test func withoutStrictFleetReplicasMayMintTheirOwnTokens() async throws {
        let fixture = try await MockFixture.start()
        let start = fixture.clock.nowSeconds
        #expect(try await send(fixture, try await fixture.connect(), token: fixture.key.token(issuedAt: start)).status == 200)
        #expect(try await send(fixture, try await fixture.connect(), token: fixture.key.token(issuedAt: start + 60)).status == 200)
        await fixture.stop()
    }
}
