import Synchronization

/// Mints the fleet-wide provider token for one key.
///
/// Every replica with the same key derives the *same* token without coordination: `iat` is aligned to the
/// rotation epoch (`floor(now / epoch) * epoch`) and the ES256 signature uses the RFC 6979 nonce, so the JWT
/// is byte-identical on every pod for a given epoch. Thread-safe; signs at most once per epoch.
///
/// A new key (``rotate(toPEM:keyID:now:)``) takes over at the start of the next epoch, not at once: replicas
/// that learn of it at slightly different moments within an epoch still switch together, and tokens stay
/// identical across the fleet.
package final class ProviderTokenSigner: Sendable, CustomStringConvertible {
    /// Allowed rotation epochs: at least 20 minutes (APNs' minimum between updates) and at most 34 minutes
    /// (`TokenRotationPolicy().longestEpochSeconds`), so a connection can hold a token 21 minutes and still
    /// switch before it is 55 minutes old.
    package static let allowedEpochs: ClosedRange<Int64> = 20 * 60...34 * 60

    package let teamID: String
    /// Rotation epoch in seconds.
    package let epochSeconds: Int64
    // Invariant for @unchecked: the ECPrivateKeys are only used under `state`'s lock.
    private struct State: @unchecked Sendable {
        var key: ECPrivateKey
        var keyID: String
        /// A key waiting for its first epoch.
        var next: (key: ECPrivateKey, keyID: String, from: Int64)?
        var cached: ProviderToken?
    }
    private let state: Mutex<State>

    /// - Parameters:
    ///   - pem: the `.p8` file's contents (PKCS#8 PEM, P-256).
    ///   - keyID: the 10-character Key ID (`kid`).
    ///   - teamID: the 10-character Team ID (`iss`).
    ///   - rotationEpoch: 20–34 minutes; default 30.
    /// - Throws: `APNsClientError` with code `.invalidCredential`.
    package convenience init(pem: String, keyID: String, teamID: String, rotationEpoch: Duration = .seconds(30 * 60)) throws(APNsClientError) {
        try self.init(key: try ECPrivateKey(pem: Array(pem.utf8)), keyID: keyID, teamID: teamID, rotationEpoch: rotationEpoch)
    }

    init(key: ECPrivateKey, keyID: String, teamID: String, rotationEpoch: Duration = .seconds(30 * 60)) throws(APNsClientError) {
        let epoch = rotationEpoch.components.seconds
        guard Self.allowedEpochs.contains(epoch) else {
            throw APNsClientError(.invalidConfiguration, "token rotation epoch must be 20–34 minutes, got \(epoch) s")
        }
        try Self.check("keyID", keyID)
        try Self.check("teamID", teamID)
        self.teamID = teamID
        self.epochSeconds = epoch
        self.state = Mutex(State(key: key, keyID: keyID, next: nil, cached: nil))
    }

    private static func check(_ name: String, _ value: String) throws(APNsClientError) {
        guard !value.isEmpty, value.utf8.allSatisfy({ $0 < 0x80 && (($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a)) }) else {
            throw APNsClientError(.invalidCredential, "\(name) must be non-empty ASCII letters and digits")
        }
    }

    /// The key id tokens are signed under now (until a rotation's epoch begins).
    package var keyID: String { state.withLock { $0.keyID } }

    /// Signs with another key from the start of the next epoch on (the current epoch's token stays as it is).
    /// A later call before then replaces the waiting key.
    /// - Returns: the UNIX time from which tokens carry the new key.
    /// - Throws: `APNsClientError` (`.invalidCredential`) if the PEM or the key id is not usable; the current
    ///   key stays.
    @discardableResult
    package func rotate(toPEM pem: String, keyID: String, now: Int64) throws(APNsClientError) -> Int64 {
        let key = try ECPrivateKey(pem: Array(pem.utf8))
        try Self.check("keyID", keyID)
        let from = issuedAt(forNow: now) + epochSeconds
        state.withLock { $0.next = (key, keyID, from) }
        return from
    }

    /// The epoch-aligned `iat` for `now` (UNIX seconds).
    package func issuedAt(forNow now: Int64) -> Int64 {
        let q = now >= 0 ? now / epochSeconds : (now - epochSeconds + 1) / epochSeconds
        return q * epochSeconds
    }

    /// The token of the epoch containing `now`. Deterministic: same key and epoch ⇒ same bytes.
    /// - Throws: `APNsClientError(.signingFailed)` if OpenSSL cannot sign (out of memory).
    package func token(now: Int64) throws(APNsClientError) -> ProviderToken {
        let iat = issuedAt(forNow: now)
        let result: ProviderToken? = state.withLock { state in
            if let next = state.next, iat >= next.from {
                state.key = next.key
                state.keyID = next.keyID
                state.next = nil
                state.cached = nil
            }
            if let cached = state.cached, cached.issuedAt == iat { return cached }
            guard let token = Self.sign(key: state.key, keyID: state.keyID, teamID: teamID, iat: iat) else { return nil }
            state.cached = token
            return token
        }
        guard let result else { throw APNsClientError(.signingFailed, "ECDSA signing failed") }
        return result
    }

    static func sign(key: ECPrivateKey, keyID: String, teamID: String, iat: Int64) -> ProviderToken? {
        let header = Base64URL.encode(Array("{\"alg\":\"ES256\",\"kid\":\"\(keyID)\"}".utf8))
        let claims = Base64URL.encode(Array("{\"iss\":\"\(teamID)\",\"iat\":\(iat)}".utf8))
        let signingInput = header + "." + claims
        guard let signature = DeterministicECDSA.sign(message: Array(signingInput.utf8), key: key) else { return nil }
        return ProviderToken(
            issuedAt: iat, keyID: keyID, teamID: teamID,
            jwt: signingInput + "." + Base64URL.encode(signature.raw)
        )
    }

    package var description: String { "ProviderTokenSigner(kid: \(keyID), iss: \(teamID), epoch: \(epochSeconds) s, key: <redacted>)" }
}

/// When a connection switches to a newer token.
///
/// APNs rejects a token change on a connection within 20 minutes of the previous one (429
/// TooManyProviderTokenUpdates), counting on its side from the first request that carried the old token, and
/// tokens older than an hour (403 ExpiredProviderToken). A connection therefore keeps its token at least
/// `minimumHold` — APNs' 20 minutes plus `holdMargin` — after adopting it (just before its first request
/// with it), measured to the nanosecond, and switches before the token is `maximumAge` (55 minutes) old.
///
/// The margin covers what makes our count longer than APNs': the time from adopting the token to APNs
/// reading that first request (one way across the network, a proxy, a queue at APNs). Without it the
/// first outside soak saw a switch 1,199.1 s after APNs first saw the token (the hold was counted in whole
/// seconds from the adoption) and 9 pushes answered 429. Both rules always hold when a token's epoch is at
/// most `maximumAge − minimumHold`: a connection may adopt a token just before the next epoch begins and
/// must keep it `minimumHold` more. With the 60 s margin that is 34 minutes (`ProviderTokenSigner.allowedEpochs`:
/// 20–34; it was 35 with no margin).
package struct TokenRotationPolicy: Sendable, Hashable {
    /// APNs' own minimum between two tokens on one connection.
    package static let apnsMinimumHold: Duration = .seconds(20 * 60)
    /// Added to `apnsMinimumHold` (see the type's comment).
    package var holdMargin: Duration = .seconds(60)
    /// A token older than this is replaced whatever the hold (APNs refuses one older than an hour).
    package var maximumAge: Int64 = 55 * 60
    package init() {}

    /// How long a connection keeps a token it adopted.
    package var minimumHold: Duration { Self.apnsMinimumHold + holdMargin }

    /// The longest token epoch with which a connection never switches within `minimumHold` and never
    /// keeps a token past `maximumAge`.
    package var longestEpochSeconds: Int64 { maximumAge - minimumHold.components.seconds - (minimumHold.components.attoseconds > 0 ? 1 : 0) }

    /// Whether a connection that adopted `current` at `adoptedAtNanoseconds` should switch to `candidate`
    /// at `nowNanoseconds` (Unix time).
    package func shouldSwitch(current: ProviderToken, adoptedAtNanoseconds: Int64, candidate: ProviderToken, nowNanoseconds: Int64) -> Bool {
        guard candidate.issuedAt > current.issuedAt else { return false }
        if nowNanoseconds / 1_000_000_000 - current.issuedAt >= maximumAge { return true }
        return Duration.nanoseconds(nowNanoseconds - adoptedAtNanoseconds) >= minimumHold
    }
}

/// RFC 4648 base64: the URL-safe alphabet without padding (JWTs) and the standard one with padding
/// (HTTP Basic credentials).
enum Base64 {
    private static let standard = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let urlSafe = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String { encode(bytes, alphabet: standard, padded: true) }

    static func encode(_ bytes: [UInt8], alphabet: [UInt8], padded: Bool) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var n = UInt32(0)
            for (offset, byte) in chunk.enumerated() { n |= UInt32(byte) << (16 - 8 * UInt32(offset)) }
            for position in 0...chunk.count { out.append(alphabet[Int(n >> (18 - 6 * UInt32(position)) & 63)]) }
            if padded { out += Array(repeating: UInt8(ascii: "="), count: 3 - chunk.count) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

enum Base64URL {
    private static let alphabet = Base64.urlSafe

    static func encode(_ bytes: [UInt8]) -> String { Base64.encode(bytes, alphabet: alphabet, padded: false) }

    static func decode(_ string: String) -> [UInt8]? {
        var lookup = [UInt8](repeating: 0xff, count: 256)
        for (i, c) in alphabet.enumerated() { lookup[Int(c)] = UInt8(i) }
        var out = [UInt8]()
        var acc: UInt32 = 0
        var bits = 0
        for c in string.utf8 {
            let v = lookup[Int(c)]
            guard v != 0xff else { return nil }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(acc >> UInt32(bits) & 0xff))
            }
        }
        return out
    }
}
