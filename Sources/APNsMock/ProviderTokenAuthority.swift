import APNsCore
import Crypto
import Foundation
import Synchronization

/// A provider token whose signature checked out against a configured key.
struct VerifiedProviderToken: Sendable {
    var keyID: String
    var teamID: String
    /// `iat`, UNIX seconds.
    var issuedAt: Int64
    var bundleIDs: Set<String>?
    var environment: APNsEnvironment?
}

/// Verifies ES256 provider tokens against the configured keys, caching results by the token string so a
/// token is verified once, not per request. In strict fleet mode it also remembers accepted tokens per key.
final class ProviderTokenAuthority: Sendable {
    private let keys: [String: ProviderKey]
    private let cache = Mutex<[String: Result<VerifiedProviderToken, Rejection>]>([:])
    /// Strict fleet mode: tokens accepted per key id, with their `iat`.
    private let fleet = Mutex<[String: [(token: String, issuedAt: Int64)]]>([:])
    let strictFleet: Bool
    let updateIntervalSeconds: Int64
    /// The `iat` of every token that verified (a soak counts the fleet's token rotations by them).
    private let verifiedIssuedAt = Mutex<Set<Int64>>([])
    /// Token changes accepted on a connection that already had a token.
    private let connectionUpdates = Atomic<Int>(0)

    struct Rejection: Error, Sendable {
        var reason: APNsReason
        var detail: String
    }

    init(keys: [ProviderKey], strictFleet: Bool, updateIntervalSeconds: Int64) {
        self.keys = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
        self.strictFleet = strictFleet
        self.updateIntervalSeconds = updateIntervalSeconds
    }

    /// Signature, `alg`, `kid` and `iss` checks (time-independent, so cached).
    func verify(_ token: String) -> Result<VerifiedProviderToken, Rejection> {
        if let cached = cache.withLock({ $0[token] }) { return cached }
        let result = Self.verifyUncached(token, keys: keys)
        if case .success(let verified) = result { verifiedIssuedAt.withLock { _ = $0.insert(verified.issuedAt) } }
        cache.withLock { cache in
            if cache.count > 10_000 { cache.removeAll(keepingCapacity: true) }
            cache[token] = result
        }
        return result
    }

    /// The `iat` of every token that verified, oldest first.
    var issuedAtOfVerifiedTokens: [Int64] { verifiedIssuedAt.withLock { $0.sorted() } }

    /// How many times a connection changed its token and the change was accepted.
    var acceptedConnectionTokenUpdates: Int { connectionUpdates.load(ordering: .relaxed) }

    func noteConnectionTokenUpdate() { connectionUpdates.add(1, ordering: .relaxed) }

    /// Strict fleet mode: admits `token` unless another token of the same key with an `iat` within the update
    /// interval was already accepted. Admitted tokens are remembered.
    func admitToFleet(_ token: String, _ verified: VerifiedProviderToken) -> Bool {
        guard strictFleet else { return true }
        return fleet.withLock { fleet in
            var accepted = fleet[verified.keyID, default: []]
            if accepted.contains(where: { $0.token == token }) { return true }
            if accepted.contains(where: { abs($0.issuedAt - verified.issuedAt) < updateIntervalSeconds }) {
                return false
            }
            // Keep the list short: tokens far older than any live one can no longer conflict.
            accepted.removeAll { verified.issuedAt - $0.issuedAt > 4 * updateIntervalSeconds }
            accepted.append((token, verified.issuedAt))
            fleet[verified.keyID] = accepted
            return true
        }
    }

    private static func verifyUncached(_ token: String, keys: [String: ProviderKey]) -> Result<VerifiedProviderToken, Rejection> {
        func reject(_ detail: String) -> Result<VerifiedProviderToken, Rejection> {
            .failure(Rejection(reason: .invalidProviderToken, detail: detail))
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return reject("not three dot-separated parts") }
        guard let headerData = Data(base64URLEncoded: parts[0]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any]
        else { return reject("header is not base64url JSON") }
        guard header["alg"] as? String == "ES256" else { return reject("alg is not ES256") }
        guard let keyID = header["kid"] as? String else { return reject("no kid") }
        guard let key = keys[keyID] else { return reject("unknown kid \(keyID)") }
        guard let claimsData = Data(base64URLEncoded: parts[1]),
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { return reject("claims are not base64url JSON") }
        guard let issuer = claims["iss"] as? String else { return reject("no iss") }
        guard let issuedAt = claims["iat"] as? Int else { return reject("no integer iat") }
        guard let signatureBytes = Data(base64URLEncoded: parts[2]) else { return reject("signature is not base64url") }
        let signature: P256.Signing.ECDSASignature
        if signatureBytes.count == 64, let raw = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes) {
            signature = raw
        } else if let der = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes) {
            signature = der
        } else {
            return reject("signature is neither raw r||s nor DER")
        }
        let signedPart = token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count)
        guard key.publicKey.isValidSignature(signature, for: Data(signedPart)) else {
            return reject("signature does not verify with key \(keyID)")
        }
        guard issuer == key.teamID else { return reject("iss \(issuer) is not the team of key \(keyID)") }
        return .success(
            VerifiedProviderToken(keyID: keyID, teamID: issuer, issuedAt: Int64(issuedAt), bundleIDs: key.bundleIDs,
                                   environment: key.environment)
        )
    }
}

extension Data {
    /// Decodes unpadded base64url.
    init?(base64URLEncoded text: Substring) {
        var base64 = String(text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64.append("=") }
        self.init(base64Encoded: base64)
    }
}
