import CRdKafka

#if canImport(Glibc)
    import Glibc
#endif

extension KafkaLibrary {
    /// librdkafka 2.3 and later describe topics with the operations the broker allows this client's principal on
    /// each (`rd_kafka_DescribeTopics` with `include_authorized_operations`, KIP-430): whether the relay may write
    /// to a topic, found out without writing. Debian 12's 2.0.2, whose headers the build uses, has no such call,
    /// so its functions are looked up in the loaded library.
    package static var hasDescribeTopics: Bool { DescribeTopicsFunctions() != nil }
}

extension KafkaTopicConfigurations {
    /// `DescribeTopics` with authorized operations for `topics`: each one's into ``authorizedOperations``, or why
    /// not into ``operationsUnknown``. `unreachable`: why the controller, where librdkafka sends the request,
    /// cannot be asked.
    static func readAuthorizedOperations(
        _ topics: [String], unreachable: String?, handle: OpaquePointer, milliseconds: Int32, timeout: Duration,
        into described: inout KafkaTopicConfigurations
    ) {
        func unknown(_ reason: String) {
            for topic in topics
            where described.authorizedOperations[topic] == nil && described.operationsUnknown[topic] == nil {
                described.operationsUnknown[topic] = reason
            }
        }
        guard let api = DescribeTopicsFunctions() else {
            return unknown(
                "librdkafka \(KafkaLibrary.version) cannot ask the broker (DescribeTopics with authorized operations came in 2.3)"
            )
        }
        if let unreachable { return unknown(unreachable) }
        // The collection copies the names, so these copies are freed after it is made.
        var names = topics.map { UnsafePointer<CChar>(strdup($0)) }
        let collection = names.withUnsafeMutableBufferPointer { api.collectionOfNames($0.baseAddress, $0.count) }
        names.forEach { free(UnsafeMutablePointer(mutating: $0)) }
        guard let collection else { return unknown("librdkafka made no topic collection") }
        defer { api.destroyCollection(collection) }
        guard let queue = rd_kafka_queue_new(handle) else { return unknown("no queue for the DescribeTopics answer") }
        defer { rd_kafka_queue_destroy(queue) }
        // RD_KAFKA_ADMIN_OP_ANY: DescribeTopics' own value is not in 2.0.2's enum, and ANY takes every option.
        let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_ANY)
        defer { rd_kafka_AdminOptions_destroy(options) }
        var errorText = [CChar](repeating: 0, count: 512)
        _ = rd_kafka_AdminOptions_set_request_timeout(options, milliseconds, &errorText, errorText.count)
        if let error = api.setIncludeAuthorizedOperations(options, 1) {
            // Ownership: the option setter's error is ours to destroy.
            defer { rd_kafka_error_destroy(error) }
            return unknown(
                "librdkafka refused to ask for authorized operations: \(String(cString: rd_kafka_error_string(error)))")
        }
        api.describeTopics(handle, collection, options, queue)
        let (answer, failure) = adminAnswer(on: queue, to: "DescribeTopics", milliseconds: milliseconds, timeout: timeout)
        guard let event = answer else { return unknown(failure ?? "DescribeTopics: no answer") }
        defer { rd_kafka_event_destroy(event) }
        guard let result = api.result(event) else { return unknown("DescribeTopics answered with another event") }
        var count = 0
        guard let answered = api.resultTopics(result, &count) else {
            return unknown("DescribeTopics answered with no topic")
        }
        for index in 0..<count {
            guard let description = answered[index], let name = api.name(description).map({ String(cString: $0) })
            else { continue }
            // NULL when the topic came without error; owned by the result either way.
            if let error = api.error(description), rd_kafka_error_code(error) != RD_KAFKA_RESP_ERR_NO_ERROR {
                described.operationsUnknown[name] = "DescribeTopics: \(String(cString: rd_kafka_error_string(error)))"
                continue
            }
            var operationCount = 0
            // NULL when the broker did not say (it answered INT32_MIN: no authorizer information).
            guard let operations = api.authorizedOperations(description, &operationCount) else {
                described.operationsUnknown[name] =
                    "the broker did not say (its DescribeTopics answer has no authorized operations)"
                continue
            }
            described.authorizedOperations[name] = Set(
                (0..<operationCount).map { String(cString: rd_kafka_AclOperation_name(operations[$0])) })
        }
        unknown("DescribeTopics answered without it")
    }
}

/// librdkafka 2.3's `DescribeTopics` functions, found in the loaded library at run time: the build's headers
/// (2.0.2) do not declare them, and the same binary runs on 2.0.2 and on a current librdkafka
/// (`LD_LIBRARY_PATH`). `nil` when any is missing. The signatures are those of librdkafka's `rdkafka.h`; every
/// pointer to a type 2.0.2 lacks is an `OpaquePointer`.
struct DescribeTopicsFunctions {
    typealias Names = UnsafeMutablePointer<UnsafePointer<CChar>?>
    /// `rd_kafka_TopicCollection_of_topic_names(const char **topics, size_t topics_cnt)`
    let collectionOfNames: @convention(c) (Names?, Int) -> OpaquePointer?
    /// `rd_kafka_TopicCollection_destroy(rd_kafka_TopicCollection_t *)`
    let destroyCollection: @convention(c) (OpaquePointer?) -> Void
    /// `rd_kafka_AdminOptions_set_include_authorized_operations(options, int true_or_false)` → `rd_kafka_error_t *`
    let setIncludeAuthorizedOperations: @convention(c) (OpaquePointer?, Int32) -> OpaquePointer?
    /// `rd_kafka_DescribeTopics(rk, const rd_kafka_TopicCollection_t *, const rd_kafka_AdminOptions_t *, rkqu)`
    let describeTopics: @convention(c) (OpaquePointer?, OpaquePointer?, OpaquePointer?, OpaquePointer?) -> Void
    /// `rd_kafka_event_DescribeTopics_result(rd_kafka_event_t *)`
    let result: @convention(c) (OpaquePointer?) -> OpaquePointer?
    /// `rd_kafka_DescribeTopics_result_topics(result, size_t *cntp)` → `const rd_kafka_TopicDescription_t **`
    let resultTopics:
        @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int>?) -> UnsafeMutablePointer<OpaquePointer?>?
    /// `rd_kafka_TopicDescription_name(const rd_kafka_TopicDescription_t *)`
    let name: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    /// `rd_kafka_TopicDescription_error(const rd_kafka_TopicDescription_t *)` → `const rd_kafka_error_t *`
    let error: @convention(c) (OpaquePointer?) -> OpaquePointer?
    /// `rd_kafka_TopicDescription_authorized_operations(topicdesc, size_t *cntp)` → `const rd_kafka_AclOperation_t *`
    let authorizedOperations:
        @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int>?) -> UnsafePointer<rd_kafka_AclOperation_t>?

    init?() {
        do {
            collectionOfNames = try Self.lookUp("rd_kafka_TopicCollection_of_topic_names")
            destroyCollection = try Self.lookUp("rd_kafka_TopicCollection_destroy")
            setIncludeAuthorizedOperations = try Self.lookUp("rd_kafka_AdminOptions_set_include_authorized_operations")
            describeTopics = try Self.lookUp("rd_kafka_DescribeTopics")
            result = try Self.lookUp("rd_kafka_event_DescribeTopics_result")
            resultTopics = try Self.lookUp("rd_kafka_DescribeTopics_result_topics")
            name = try Self.lookUp("rd_kafka_TopicDescription_name")
            error = try Self.lookUp("rd_kafka_TopicDescription_error")
            authorizedOperations = try Self.lookUp("rd_kafka_TopicDescription_authorized_operations")
        } catch {
            return nil
        }
    }

    private struct Missing: Error {}

    /// The function `symbol` names, typed as the property it is assigned to.
    private static func lookUp<Function>(_ symbol: String) throws(Missing) -> Function {
        // A nil handle is glibc's RTLD_DEFAULT: every object the process has loaded, librdkafka among them (the
        // binary links it), whichever copy LD_LIBRARY_PATH chose.
        guard let address = dlsym(nil, symbol) else { throw Missing() }
        return unsafeBitCast(address, to: Function.self)
    }
}
