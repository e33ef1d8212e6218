import APNsCore
import NIOCore
import NIOHTTP2
import NIOSSL

/// Answering a request once its last frame arrived: faults first, then routing (device push, broadcast,
/// channel management), validation and the answer; what each request teaches the connection (GOAWAY after
/// N streams, the stream limit dropped after a rejection).
extension APNsConnectionHandler {
    /// A request's last frame arrived: apply faults, validate, answer.
    func complete(_ streamID: HTTP2StreamID) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        complete(streamID, stream)
    }

    func complete(_ streamID: HTTP2StreamID, _ stream: OpenStream) {
        answeredSinceFlush += 1
        // The one pass over the header block; routing and every check read from it.
        let headers = RequestHeaders(stream.headers)
        let route = RequestRoute(path: headers.path, role: role)
        let kind = route.kind
        switch server.faults.nextRequestFault() {
        case .refuse:
            emit(HTTP2Frame(streamID: streamID, payload: .rstStream(.refusedStream)))
            records.append(.refused, kind: kind)
            return
        case .drop:
            records.append(.dropped, kind: kind)
            commitRecords()
            outbox.removeAll()
            closed = true
            context?.close(promise: nil)
            return
        case .withhold:
            records.append(.withheld, kind: kind)
            closeIfDrained()
            return
        case .fail(let reason):
            reject(Exchange(streamID: streamID, kind: kind, id: answerID(for: headers, kind: kind)), reason: reason)
        case .none:
            let exchange = Exchange(streamID: streamID, kind: kind, id: answerID(for: headers, kind: kind))
            switch route {
            case .device: processDevicePush(exchange, headers, stream.body)
            case .broadcast: processBroadcast(exchange, headers, stream.body)
            case .management(let channelRoute): processChannelRequest(exchange, headers, channelRoute, stream.body)
            case .unknown: reject(exchange, reason: .badPath)
            }
        }
        processedStreams += 1
        if streamID > highestProcessedStreamID { highestProcessedStreamID = streamID }
        if let limit = goAwayAfterStreams, processedStreams >= limit, goAwayLastStreamID == nil {
            goAway(lastStreamID: highestProcessedStreamID, reason: "Shutdown")
        }
        closeIfDrained()
    }

    /// The request's own id when it is a canonical UUID (`apns-id` for device pushes, `apns-request-id`
    /// otherwise), else a generated one.
    func answerID(for headers: RequestHeaders, kind: RequestKind) -> AnswerID {
        let header = kind.answerIDHeader
        let sent = header == .apnsID ? headers.apnsID : headers.requestID
        if let sent, APNsNotification.isCanonicalUUID(sent) { return AnswerID(header: header, value: sent) }
        return AnswerID(header: header, value: messageIDs.next())
    }

    func processDevicePush(_ exchange: Exchange, _ headers: RequestHeaders, _ body: ByteBuffer?) {
        let now = server.clock.nowMilliseconds()
        let request: CheckedDeviceRequest
        switch DeviceRequestRules.check(
            headers,
            defaultTopic: authentication.defaultTopic,
            environment: server.environment,
            registry: server.registry,
            nowMilliseconds: now
        ) {
        case .success(let checked):
            request = checked
        case .failure(let rejection):
            reject(exchange, reason: rejection.reason, timestamp: rejection.timestampMilliseconds, deviceToken: rejection.deviceToken)
            return
        }
        if let reason = authenticate(request, authorization: headers.authorization, nowMilliseconds: now) {
            reject(exchange, reason: reason, deviceToken: request.deviceToken)
            return
        }
        let payloadSize = body?.readableBytes ?? 0
        if let rejection = DeviceRequestRules.checkPayload(size: payloadSize, pushType: request.pushType) {
            reject(exchange, reason: rejection.reason, deviceToken: request.deviceToken)
            return
        }
        restoreStreamLimitAfterSuccess(exchange.streamID)
        let accepted = AcceptedRequest(
            deviceToken: request.deviceToken,
            topic: request.topic,
            pushType: request.pushType,
            apnsID: exchange.id.value,
            priority: request.priority,
            expiration: request.expiration,
            collapseID: headers.collapseID,
            payload: records.storePayload(body),
            connectionID: connectionID,
            receivedAtMilliseconds: now
        )
        records.append(.accepted(accepted), deviceToken: request.deviceToken, kind: .device)
        emit(APNsAnswer.accepted(exchange.streamID, id: exchange.id, uniqueID: developmentUniqueID()))
    }

    /// Authenticates `request` with the connection's credential; the first valid one raises
    /// MAX_CONCURRENT_STREAMS from 1 (apns-reference.md §7). Shared by every route on both listeners.
    func authenticate(_ request: some AuthenticatedRequest, authorization: String?, nowMilliseconds: Int64) -> APNsReason? {
        if let reason = authentication.authenticate(
            authorization: authorization,
            request: request,
            authority: server.authority,
            environment: server.environment,
            nowMilliseconds: nowMilliseconds,
            lifetimeSeconds: server.tokenLifetimeSeconds,
            updateIntervalMilliseconds: server.tokenUpdateIntervalMilliseconds
        ) {
            return reason
        }
        if !streamLimitRaised, authentication.hasValidCredential {
            streamLimitRaised = true
            advertise(maxConcurrentStreams: server.maxConcurrentStreams)
        }
        return nil
    }

    /// A request succeeded: a limit dropped to 1 after a rejection (`dropStreamLimitAfterRejection`) returns,
    /// once a push the client sent under that limit succeeds (a stream opened after it acknowledged the drop).
    /// Successes of streams opened before the drop do not count: the client has not run under the limit yet.
    func restoreStreamLimitAfterSuccess(_ streamID: HTTP2StreamID) {
        if streamLimitDropped, let boundary = streamLimitDropBoundary, streamID > boundary {
            streamLimitDropped = false
            streamLimitDropBoundary = nil
            advertise(maxConcurrentStreams: server.maxConcurrentStreams)
        }
    }

    /// `apns-unique-id` of device-push answers: only the development environment sends one (§6).
    func developmentUniqueID() -> String? {
        server.environment == .development ? messageIDs.next(lowercase: true) : nil
    }

    /// A new lower-case `apns-unique-id`.
    func makeUniqueID() -> String { messageIDs.next(lowercase: true) }

    /// Notes a request's outcome for this read batch's observations.
    func record(_ outcome: ObservationStore.Outcome, kind: RequestKind) {
        records.append(outcome, kind: kind)
    }

    /// Answers with `reason` (its status; 400 for unconfirmed reasons) and the JSON body. Device-push errors
    /// carry `apns-unique-id` in the development environment, as successes do; broadcast and
    /// channel-management errors carry only `apns-request-id` (§10).
    func reject(_ exchange: Exchange, reason: APNsReason, timestamp: Int64? = nil, deviceToken: String? = nil) {
        let status = reason.status ?? 400
        if dropLimitAfterRejection, streamLimitRaised, !streamLimitDropped, case .token = authentication.mode {
            streamLimitDropped = true
            advertise(maxConcurrentStreams: 1)
            acknowledgementsUntilDrop = unacknowledgedStreamLimits.count
        }
        records.append(.rejected(status: status, reason: reason), deviceToken: deviceToken, kind: exchange.kind)
        let answer = APNsAnswer.rejected(
            exchange.streamID, status: status, reason: reason,
            timestampMilliseconds: status == 410 ? timestamp ?? server.clock.nowMilliseconds() : nil,
            id: exchange.id, uniqueID: exchange.kind == .device ? developmentUniqueID() : nil,
            allocator: context?.channel.allocator ?? ByteBufferAllocator()
        )
        emit(answer.headers)
        emit(answer.body)
    }

    func closeIfDrained() {
        if goAwayLastStreamID != nil, streams.isEmpty { closeAfterOutbox = true }
    }
}
