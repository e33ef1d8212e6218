import APNsCore
import NIOCore

/// Broadcast sends (push port) and channel management (management port), apns-reference.md §10. The checks are
/// in `BroadcastRequestRules` and `ChannelManagementRules`; this glues them to the connection's
/// authentication, answers and observations.
extension APNsConnectionHandler {
    func processBroadcast(_ exchange: Exchange, _ headers: RequestHeaders, _ body: ByteBuffer?) {
        let request: CheckedBroadcastRequest
        switch BroadcastRequestRules.check(headers) {
        case .success(let checked): request = checked
        case .failure(let rejection):
            reject(exchange, reason: rejection.reason)
            return
        }
        let now = server.clock.nowMilliseconds()
        if let reason = authenticate(request, authorization: headers.authorization, nowMilliseconds: now) {
            reject(exchange, reason: reason)
            return
        }
        if let rejection = BroadcastRequestRules.checkAfterAuthentication(
            request,
            payloadSize: body?.readableBytes ?? 0,
            broadcastDisabledBundles: server.broadcastDisabledBundles,
            channels: server.channels
        ) {
            reject(exchange, reason: rejection.reason)
            return
        }
        restoreStreamLimitAfterSuccess(exchange.streamID)
        // Broadcast answers always carry `apns-unique-id`, in both environments (§10).
        let uniqueID = makeUniqueID()
        let accepted = AcceptedBroadcast(
            channelID: request.channelID,
            bundleID: request.bundleID,
            requestID: exchange.id.value,
            uniqueID: uniqueID,
            priority: request.priority,
            expiration: request.expiration,
            payload: body.map { Array($0.readableBytesView) } ?? [],
            connectionID: connectionID,
            receivedAtMilliseconds: now
        )
        record(.acceptedBroadcast(accepted), kind: .broadcast)
        emit(APNsAnswer.accepted(exchange.streamID, id: exchange.id, uniqueID: uniqueID))
    }

    func processChannelRequest(
        _ exchange: Exchange,
        _ headers: RequestHeaders,
        _ route: ChannelManagementRoute,
        _ body: ByteBuffer?
    ) {
        let request: CheckedChannelRequest
        switch ChannelManagementRules.check(headers, route: route) {
        case .success(let checked): request = checked
        case .failure(let rejection):
            reject(exchange, reason: rejection.reason)
            return
        }
        let now = server.clock.nowMilliseconds()
        if let reason = authenticate(request, authorization: headers.authorization, nowMilliseconds: now) {
            reject(exchange, reason: reason)
            return
        }
        let answer: ChannelManagementAnswer
        switch ChannelManagementRules.perform(
            request,
            body: body,
            broadcastDisabledBundles: server.broadcastDisabledBundles,
            channels: server.channels,
            allocator: context?.channel.allocator ?? ByteBufferAllocator()
        ) {
        case .success(let success): answer = success
        case .failure(let rejection):
            reject(exchange, reason: rejection.reason)
            return
        }
        restoreStreamLimitAfterSuccess(exchange.streamID)
        record(.succeeded(status: answer.status), kind: .management)
        for frame in APNsAnswer.succeeded(
            exchange.streamID, status: answer.status, id: exchange.id,
            extraHeaders: answer.extraHeaders, jsonBody: answer.jsonBody
        ) {
            emit(frame)
        }
    }
}
