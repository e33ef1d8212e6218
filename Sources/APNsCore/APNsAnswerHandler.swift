/// Who hears a request's answer, as an object: a caller that already has one object per request (the
/// relay's in-flight event) is told through it, with no closure allocated per request.
package protocol APNsAnswerHandler: AnyObject, Sendable {
    /// APNs' answer, or an error saying why none came. Called once per request, on any thread (a connection's
    /// event loop, or the caller's own when the request ends at once): it must not block.
    func answered(_ result: Result<APNsResponse, any Error>)
}
