/// A signed APNs provider token (JWT, ES256). Its text is a secret: `description` redacts it.
public struct ProviderToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// `iat`, UNIX seconds; aligned to the signer's rotation epoch.
    public let issuedAt: Int64
    public let keyID: String
    public let teamID: String
    /// `header.claims.signature`. Never log it.
    public let jwt: String

    /// The `authorization` header value: `bearer <jwt>`.
    public var authorization: String { "bearer " + jwt }

    public var description: String { "ProviderToken(kid: \(keyID), iss: \(teamID), iat: \(issuedAt), jwt: <redacted>)" }
    public var debugDescription: String { description }
}
