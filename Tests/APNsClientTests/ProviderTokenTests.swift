import Foundation
import ServiceSupport
import TestSupport
import Testing
@testable import APNsClient

@Suite struct ProviderTokenTests {
    static func hex(_ s: String) -> [UInt8] {
        var out = [UInt8]()
        var it = s.makeIterator()
        while let a = it.next(), let b = it.next() { out.append(UInt8(String([a, b]), radix: 16)!) }
        return out
    }

    // RFC 6979 appendix A.2.5: P-256, SHA-256.
    static let rfcKey = hex("C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721")

    @Test func rfc6979SampleVectorMatchesExactly() throws {
        let key = try ECPrivateKey(rawPrivateKey: Self.rfcKey)
        let sig = try #require(DeterministicECDSA.sign(message: Array("sample".utf8), key: key))
        #expect(sig.k == Self.hex("A6E3C57DD01ABE90086538398355DD4C3B17AA873382B0F24D6129493D8AAD60"))
        #expect(sig.r == Self.hex("EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716"))
        #expect(sig.s == Self.hex("F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"))
        #expect(DeterministicECDSA.verify(message: Array("sample".utf8), raw: sig.raw, key: key))
    }

    @Test func rfc6979TestVectorMatchesExactly() throws {
        let key = try ECPrivateKey(rawPrivateKey: Self.rfcKey)
        let sig = try #require(DeterministicECDSA.sign(message: Array("test".utf8), key: key))
        #expect(sig.k == Self.hex("D16B6AE827F17175E040871A1C7EC3500192C4C92677336EC2537ACAEE0008E0"))
        #expect(sig.r == Self.hex("F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367"))
        #expect(sig.s == Self.hex("019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083"))
    }

    @Test func tokenHasAPNsShapeAndEpochAlignedIssuedAt() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (_, pem) = try await generateP8Key(in: dir)
        let signer = try ProviderTokenSigner(pem: pem, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try signer.token(now: 1_700_000_123)
        #expect(token.issuedAt == 1_700_000_123 / 1800 * 1800)
        let parts = token.jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        #expect(Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) } == #"{"iss":"DEF123GHIJ","iat":\#(token.issuedAt)}"#)
        #expect(Base64URL.decode(parts[2])?.count == 64)
        #expect(!token.jwt.contains("=") && !token.jwt.contains("+") && !token.jwt.contains("/"))
        #expect(token.authorization == "bearer " + token.jwt)
        // Same epoch ⇒ same bytes; next epoch ⇒ a new token.
        #expect(try signer.token(now: token.issuedAt + 1799).jwt == token.jwt)
        #expect(try signer.token(now: token.issuedAt + 1800).issuedAt == token.issuedAt + 1800)
    }

    @Test func descriptionsNeverContainSecrets() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (_, pem) = try await generateP8Key(in: dir)
        let signer = try ProviderTokenSigner(pem: pem, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try signer.token(now: 1_700_000_000)
        let signature = String(token.jwt.split(separator: ".")[2])
        for text in ["\(token)", String(reflecting: token), "\(signer)", "\(APNsClientConfiguration.Credential.token(signer))"] {
            #expect(!text.contains(signature))
            #expect(!text.contains("PRIVATE KEY"))
        }
    }

    @Test func rejectsEpochOutsideTwentyToThirtyFiveMinutes() throws {
        let key = try ECPrivateKey(rawPrivateKey: Self.rfcKey)
        #expect(throws: APNsClientError.self) { try ProviderTokenSigner(key: key, keyID: "A", teamID: "B", rotationEpoch: .seconds(19 * 60)) }
        #expect(throws: APNsClientError.self) { try ProviderTokenSigner(key: key, keyID: "A", teamID: "B", rotationEpoch: .seconds(36 * 60)) }
        _ = try ProviderTokenSigner(key: key, keyID: "A", teamID: "B", rotationEpoch: .seconds(20 * 60))
    }

    @Test func signatureVerifiesWithOpenSSLCommandLine() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (keyPath, pem) = try await generateP8Key(in: dir)
        let signer = try ProviderTokenSigner(pem: pem, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try signer.token(now: 1_700_000_000)
        let parts = token.jwt.split(separator: ".")
        let raw = try #require(Base64URL.decode(String(parts[2])))
        let input = dir.appendingPathComponent("input")
        try Data((parts[0] + "." + parts[1]).utf8).write(to: input)
        let der = dir.appendingPathComponent("sig.der")
        try Data(Self.derSignature(raw)).write(to: der)
        let pub = dir.appendingPathComponent("pub.pem").path
        _ = try await runProcess("/usr/bin/openssl", ["pkey", "-in", keyPath, "-pubout", "-out", pub], check: true).stdout
        let out = try await runProcess("/usr/bin/openssl", ["dgst", "-sha256", "-verify", pub, "-signature", der.path, input.path], check: true).stdout
        #expect(out.contains("Verified OK"))
    }

    @Test func twoProcessesMintByteIdenticalTokens() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (keyPath, pem) = try await generateP8Key(in: dir)
        let tool = try BuiltProducts.executable("apns-client-tool").path
        let args = ["token", "--key", keyPath, "--kid", "ABC123DEFG", "--team", "DEF123GHIJ", "--now", "1700000123"]
        let first = try await runProcess(tool, args, check: true).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let second = try await runProcess(tool, args, check: true).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!first.isEmpty)
        #expect(first == second)
        let here = try ProviderTokenSigner(pem: pem, keyID: "ABC123DEFG", teamID: "DEF123GHIJ").token(now: 1_700_000_123)
        #expect(here.jwt == first)
    }

    /// A new key takes over at the next epoch, not at once: two replicas that learn of it at different
    /// moments of one epoch present identical tokens before and after the switch.
    @Test func aRotatedKeyTakesOverAtTheNextEpochOnEveryReplica() throws {
        let old = TestSigningKey(keyID: "OLDKEY0001", teamID: "DEF123GHIJ")
        let new = TestSigningKey(keyID: "NEWKEY0002", teamID: "DEF123GHIJ")
        let a = try ProviderTokenSigner(pem: old.pem, keyID: old.keyID, teamID: "DEF123GHIJ")
        let b = try ProviderTokenSigner(pem: old.pem, keyID: old.keyID, teamID: "DEF123GHIJ")
        let epochStart: Int64 = 1_700_001_000 - 1_700_001_000 % 1800
        let before = try a.token(now: epochStart + 60)
        #expect(try a.rotate(toPEM: new.pem, keyID: new.keyID, now: epochStart + 100) == epochStart + 1800)
        #expect(try a.token(now: epochStart + 200).jwt == before.jwt, "the current epoch keeps its token")
        #expect(try b.token(now: epochStart + 1000).jwt == before.jwt)
        #expect(try b.rotate(toPEM: new.pem, keyID: new.keyID, now: epochStart + 1700) == epochStart + 1800)
        let after = try a.token(now: epochStart + 1800)
        #expect(after.keyID == "NEWKEY0002" && a.keyID == "NEWKEY0002")
        #expect(try b.token(now: epochStart + 1801).jwt == after.jwt, "both replicas switched together")
        #expect(after.jwt != before.jwt)

        // A key that cannot be used is refused and the current one stays.
        #expect(throws: APNsClientError.self) { try a.rotate(toPEM: "-----BEGIN PRIVATE KEY-----\nnot a key\n", keyID: "BADKEY0003", now: epochStart + 1900) }
        #expect(throws: APNsClientError.self) { try a.rotate(toPEM: old.pem, keyID: "bad id!", now: epochStart + 1900) }
        #expect(try a.token(now: epochStart + 3600).keyID == "NEWKEY0002")
    }

    /// One connection over 6 hours, adopting its first token at offsets across the first epoch (to the
    /// nanosecond) and checking every 10 s: every change comes at least APNs' 20 minutes plus the margin after
    /// the previous one, and no token is ever 55 minutes old — for every allowed epoch. The bounds are
    /// APNs' (apns-reference.md), not the policy's own numbers.
    @Test(arguments: [20, 25, 30, 34])
    func rotationPolicyHoldsTwentyMinutesWithAMarginAndSwitchesBeforeFiftyFive(epochMinutes: Int) throws {
        let key = try ECPrivateKey(rawPrivateKey: Self.rfcKey)
        let signer = try ProviderTokenSigner(key: key, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", rotationEpoch: .seconds(epochMinutes * 60))
        let policy = TokenRotationPolicy()
        let apnsHold: Int64 = 20 * 60 * 1_000_000_000
        let epoch = Int64(epochMinutes * 60)
        for start in stride(from: Int64(1_700_000_000) * 1_000_000_000, to: (1_700_000_000 + epoch) * 1_000_000_000, by: 97_300_000_001) {
            var current = try signer.token(now: start / 1_000_000_000)
            var adoptedAt = start
            var changes: [Int64] = []
            for now in stride(from: start, to: start + 6 * 3600 * 1_000_000_000, by: 10_000_000_000) {
                #expect(now / 1_000_000_000 - current.issuedAt < 55 * 60, "token older than 55 minutes at \(now)")
                let candidate = try signer.token(now: now / 1_000_000_000)
                if policy.shouldSwitch(current: current, adoptedAtNanoseconds: adoptedAt, candidate: candidate, nowNanoseconds: now) {
                    changes.append(now)
                    current = candidate
                    adoptedAt = now
                }
            }
            for (a, b) in zip([start] + changes, changes) {
                #expect(b - a >= apnsHold + 60 * 1_000_000_000, "a switch \(Double(b - a) / 1e9) s after the previous token was taken")
            }
            #expect(changes.count >= 6 * 60 / 55, "it rotates: \(changes.count) changes in 6 hours")
        }
    }

    /// The longest epoch is what the hold and the 55-minute ceiling leave: 34 minutes. At 35 a connection
    /// that took a token just before the next epoch would have to break one rule or the other.
    @Test func theLongestEpochLeavesRoomForTheHoldBeforeFiftyFiveMinutes() throws {
        let policy = TokenRotationPolicy()
        #expect(ProviderTokenSigner.allowedEpochs.upperBound == policy.longestEpochSeconds)
        #expect(ProviderTokenSigner.allowedEpochs.upperBound + policy.minimumHold.components.seconds <= 55 * 60)
        #expect(35 * 60 + policy.minimumHold.components.seconds > 55 * 60)
        #expect(throws: APNsClientError.self) {
            try ProviderTokenSigner(key: try ECPrivateKey(rawPrivateKey: Self.rfcKey), keyID: "ABC123DEFG", teamID: "DEF123GHIJ", rotationEpoch: .seconds(35 * 60))
        }
    }

    /// APNs counts a connection's 20 minutes from the first request it saw with the token. A connection that
    /// took its token at .9 of a second once switched 1,199.1 s later as APNs saw it (its hold was counted in
    /// whole seconds) and got 429 TooManyProviderTokenUpdates. Here the mock counts as APNs does, on the
    /// same clock as the client: a request 1,199.2 s after the first, when a newer token exists, still
    /// carries the first token and is accepted.
    @Test func aConnectionKeepsItsTokenTwentyMinutesAsAPNsCountsThem() async throws {
        let epochStart: Int64 = 1_700_001_000 - 1_700_001_000 % 1800
        let clock = ManualWallClock(millisecondsSinceEpoch: (epochStart + 700) * 1000 + 900)
        let mock = try await MockFixture.start(clock: clock)
        let client = try mock.client(clock: clock.clock) { $0.pool.maxConnections = 1 }
        #expect(try await client.send(try MockFixture.notification(0), timeout: hangGuard).status == 200)
        clock.advance(by: .milliseconds(1_199_200))  // the next epoch's token exists (epochStart + 1800)
        let early = try await client.send(try MockFixture.notification(1), timeout: hangGuard)
        #expect(early.status == 200, "answered \(early.status) \(early.reason?.rawValue ?? ""): the token changed 1,199.2 s after APNs first saw it")
        // A 200 alone cannot tell a kept token from a changed one: the mock counts the changes it accepted.
        #expect(mock.server.acceptedConnectionTokenUpdates == 0, "the connection kept its first token at 1,199.2 s")
        clock.advance(by: .seconds(61))  // 1,260.2 s: past APNs' 20 minutes and the margin
        let later = try await client.send(try MockFixture.notification(2), timeout: hangGuard)
        #expect(later.status == 200, "answered \(later.status) \(later.reason?.rawValue ?? "")")
        #expect(mock.server.acceptedConnectionTokenUpdates == 1, "the connection changed to the next epoch's token at 1,260.2 s, and APNs accepted it")
        #expect(client.connectionCount(for: .production) == 1, "one connection throughout")
        await client.shutdown()
        await mock.stop()
    }

    /// DER `SEQUENCE { INTEGER r, INTEGER s }` from raw r‖s.
    static func derSignature(_ raw: [UInt8]) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var b = Array(bytes.drop { $0 == 0 })
            if b.isEmpty { b = [0] }
            if b[0] & 0x80 != 0 { b.insert(0, at: 0) }
            return [0x02, UInt8(b.count)] + b
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        return [0x30, UInt8(body.count)] + body
    }
}
