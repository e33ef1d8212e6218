import CEventJSONFuzz
import Relay
import Synchronization

/// `event-json`: the C++ entry (Fuzz/EventJSON), which the libFuzzer binary built straight from
/// Sources/CEventJSON calls too; here with the schema the relay embeds.
enum EventJSONTarget {
    /// A decoder and the compiled schema, made once and kept for the process, as the relay keeps them. Under a
    /// lock: the decoder owns its buffer, and the replay may run targets from several tasks.
    private static let context: Mutex<OpaquePointer> = {
        var schema = JSONSchemas.notificationEvent
        let pointer = schema.withUTF8 { text in
            text.withMemoryRebound(to: CChar.self) { cej_fuzz_context_create($0.baseAddress, $0.count) }
        }
        guard let pointer else { preconditionFailure("the embedded notification-event schema does not compile") }
        return Mutex(pointer)
    }()

    static func run(_ input: [UInt8]) {
        context.withLock { context in
            input.withUnsafeBufferPointer { bytes in
                _ = cej_fuzz_event_json(context, bytes.baseAddress, bytes.count)
            }
        }
    }
}
