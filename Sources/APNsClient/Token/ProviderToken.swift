/// A signed APNs provider token (JWT, ES256). Its text is a secret: `description` redacts it.
package struct ProviderToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// `iat`, UNIX seconds; aligned to the signer's rotation epoch.
    package let issuedAt: Int64
    package let keyID: String
    package let teamID: String
    /// `header.claims.signature`. Never log it.
    package let jwt: String

    /// The `authorization` header value: `bearer <jwt>`.
    package var authorization: String { "bearer " + jwt }

    package var description: String { "ProviderToken(kid: \(keyID), iss: \(teamID), iat: \(issuedAt), jwt: <redacted>)" }
    package var debugDescription: String { description }
}
