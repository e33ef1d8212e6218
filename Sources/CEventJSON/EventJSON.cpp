// Fast notification-event decoder on simdjson ondemand.
//
// simdjson's stage 1 validates UTF-8 and finds the structure; ondemand then only looks at what it is
// asked for. Skipped values are *not* fully validated (a bad number inside a skipped array passes), so
// the decoder walks every value of `payload` and `metadata` and checks each token with the strict rules
// of JSONTokens.h, which are the rules nlohmann (the reference parser) applies. The differential test
// holds the two to the same verdicts.
#include "CEventJSON.h"
#include "JSONTokens.h"

#include <simdjson.h>

#include <cstring>
#include <memory>
#include <new>
#include <string_view>

using namespace simdjson;

extern "C" const char *cej_simdjson_implementation(void) {
    return simdjson::get_active_implementation()->name().data();
}

namespace {

/// The schema's top-level members.
struct KnownKey {
    std::string_view name;
    uint32_t field;
};
constexpr KnownKey knownKeys[] = {
    {"id", CEJ_FIELD_ID},
    {"deviceToken", CEJ_FIELD_DEVICE_TOKEN},
    {"topic", CEJ_FIELD_TOPIC},
    {"pushType", CEJ_FIELD_PUSH_TYPE},
    {"priority", CEJ_FIELD_PRIORITY},
    {"expiration", CEJ_FIELD_EXPIRATION},
    {"collapseId", CEJ_FIELD_COLLAPSE_ID},
    {"apnsId", CEJ_FIELD_APNS_ID},
    {"environment", CEJ_FIELD_ENVIRONMENT},
    {"payload", CEJ_FIELD_PAYLOAD},
    {"metadata", CEJ_FIELD_METADATA},
    {"channelId", CEJ_FIELD_CHANNEL_ID},
    {"apnsRequestId", CEJ_FIELD_APNS_REQUEST_ID},
};

inline uint32_t fieldFor(std::string_view key) {
    for (const auto &known : knownKeys) {
        if (known.name == key) return known.field;
    }
    return 0;
}

inline int32_t statusFor(error_code error) {
    switch (error) {
    case SUCCESS: return CEJ_OK;
    case UTF8_ERROR: return CEJ_INVALID_UTF8;
    case DEPTH_ERROR: return CEJ_TOO_DEEP;
    case MEMALLOC: return CEJ_INTERNAL;
    default: return CEJ_INVALID_JSON;
    }
}

} // namespace

struct cej_decoder {
    ondemand::parser parser;
    /// Validates events whose root is a scalar (allocated on first use).
    simdjson::dom::parser scalarParser;
    std::unique_ptr<uint8_t[]> buffer;
    /// The document being decoded, for positions; only valid inside `decode`.
    ondemand::document *document = nullptr;

    cej_decoder()
        // Depth is enforced by `walk`; simdjson's own limit only has to be above it.
        : parser(CEJ_MAX_EVENT_BYTES),
          buffer(new uint8_t[CEJ_MAX_EVENT_BYTES + SIMDJSON_PADDING]) {
        if (parser.allocate(CEJ_MAX_EVENT_BYTES, 1024) != SUCCESS) throw std::bad_alloc();
    }

    /// True when nothing but whitespace follows the root object, whose iteration has just finished:
    /// ondemand then stands at the end of the structural tokens and reports OUT_OF_BOUNDS; a trailing
    /// token (whitespace is never one) gives its location instead.
    bool atEndAfterRoot() {
        const char *location;
        return document->current_location().get(location) == OUT_OF_BOUNDS;
    }

    int32_t decode(const uint8_t *bytes, size_t len, cej_event *out);
    int32_t readString(ondemand::value value, uint32_t field, cej_string &target, cej_event *out);
    int32_t readInteger(ondemand::value value, uint32_t field, int64_t &target, cej_event *out);
    int32_t readObject(ondemand::value value, uint32_t field, cej_range &target, cej_event *out);
};

int32_t cej_decoder::readString(ondemand::value value, uint32_t field, cej_string &target, cej_event *out) {
    out->error_field = field;
    ondemand::json_type type;
    if (value.type().get(type) != SUCCESS) return CEJ_INVALID_JSON;
    if (type != ondemand::json_type::string) {
        // Still a syntax error if the wrong-typed value is not JSON; either way the event is refused.
        int32_t status = walk(value, 2);
        return status == CEJ_OK ? CEJ_WRONG_TYPE : status;
    }
    std::string_view token = value.raw_json_token();
    if (!validStringBody(reinterpret_cast<const uint8_t *>(token.data()) + 1)) return CEJ_INVALID_JSON;
    std::string_view text;
    error_code error = value.get_string().get(text);
    if (error != SUCCESS) return statusFor(error);
    target.ptr = text.data();
    target.len = text.size();
    out->error_field = 0;
    return CEJ_OK;
}

int32_t cej_decoder::readInteger(ondemand::value value, uint32_t field, int64_t &target, cej_event *out) {
    out->error_field = field;
    ondemand::json_type type;
    if (value.type().get(type) != SUCCESS) return CEJ_INVALID_JSON;
    if (type != ondemand::json_type::number) {
        int32_t status = walk(value, 2);
        return status == CEJ_OK ? CEJ_WRONG_TYPE : status;
    }
    std::string_view token = value.raw_json_token();
    bool integral;
    if (!validNumberToken(token, integral)) return CEJ_INVALID_JSON;
    if (!integral) return CEJ_WRONG_TYPE;
    int64_t number;
    if (value.get_int64().get(number) != SUCCESS) return CEJ_INTEGER_OUT_OF_RANGE;
    target = number;
    out->error_field = 0;
    return CEJ_OK;
}

int32_t cej_decoder::readObject(ondemand::value value, uint32_t field, cej_range &target, cej_event *out) {
    out->error_field = field;
    ondemand::json_type type;
    if (value.type().get(type) != SUCCESS) return CEJ_INVALID_JSON;
    const char *start;
    if (value.current_location().get(start) != SUCCESS) return CEJ_INVALID_JSON;
    int32_t status = walk(value, 2);
    if (status != CEJ_OK) return status;
    if (type != ondemand::json_type::object) return CEJ_WRONG_TYPE;
    // After the walk the document's iterator stands on the token that follows the object (`,` or the
    // event's `}`); the object's text ends at the last non-whitespace byte before it, its `}`.
    const char *next;
    // No token after the object: the event was cut off before its closing brace.
    if (document->current_location().get(next) != SUCCESS) return CEJ_INVALID_JSON;
    const char *end = next;
    while (end > start && isJSONWhitespace(end[-1])) --end;
    const char *base = reinterpret_cast<const char *>(buffer.get());
    target.offset = static_cast<size_t>(start - base);
    target.len = static_cast<size_t>(end - start);
    out->error_field = 0;
    return CEJ_OK;
}

int32_t cej_decoder::decode(const uint8_t *bytes, size_t len, cej_event *out) {
    std::memset(out, 0, sizeof(*out));
    if (len > CEJ_MAX_EVENT_BYTES) return out->status = CEJ_TOO_LARGE;
    // A UTF-8 byte order mark is refused (RFC 8259: senders must not add one); nlohmann would skip it.
    if (len >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF) return out->status = CEJ_INVALID_JSON;
    std::memcpy(buffer.get(), bytes, len);
    std::memset(buffer.get() + len, 0, SIMDJSON_PADDING);

    ondemand::document document;
    this->document = &document;
    error_code error = parser.iterate(buffer.get(), len, len + SIMDJSON_PADDING).get(document);
    if (error != SUCCESS) return out->status = statusFor(error);

    ondemand::json_type rootType;
    error = document.type().get(rootType);
    if (error != SUCCESS) return out->status = statusFor(error);
    if (rootType != ondemand::json_type::object) {
        // Refused either way; report a syntax error if there is one, because that is the real problem.
        ondemand::value root;
        if (document.get_value().get(root) == SUCCESS) {
            int32_t status = walk(root, 1);
            if (status != CEJ_OK) return out->status = status;
            return out->status = CEJ_NOT_OBJECT;
        }
        // A scalar root (`true`, `12`, or `test`): on-demand cannot read it as a value, so the DOM parser
        // checks the whole text (a rare path: the event is refused anyway, this only picks the code).
        simdjson::dom::element scalar;
        error = scalarParser.parse(buffer.get(), len, false).get(scalar);
        if (error != SUCCESS) return out->status = statusFor(error);
        return out->status = CEJ_NOT_OBJECT;
    }

    ondemand::object object;
    error = document.get_object().get(object);
    if (error != SUCCESS) return out->status = statusFor(error);
    for (auto entry : object) {
        ondemand::field field;
        error = std::move(entry).get(field);
        if (error != SUCCESS) return out->status = statusFor(error);
        if (!validStringBody(reinterpret_cast<const uint8_t *>(field.key().raw()))) return out->status = CEJ_INVALID_JSON;
        std::string_view key;
        error = field.unescaped_key().get(key);
        if (error != SUCCESS) return out->status = statusFor(error);
        uint32_t which = fieldFor(key);
        if (which == 0) {
            out->error_key.ptr = key.data();
            out->error_key.len = key.size();
            // Reported as unknown even if the rest is not JSON: the event is refused either way.
            return out->status = CEJ_UNKNOWN_KEY;
        }
        if (out->present & which) {
            out->error_field = which;
            return out->status = CEJ_DUPLICATE_KEY;
        }
        out->present |= which;
        ondemand::value value = field.value();
        int32_t status;
        switch (which) {
        case CEJ_FIELD_ID: status = readString(value, which, out->id, out); break;
        case CEJ_FIELD_DEVICE_TOKEN: status = readString(value, which, out->device_token, out); break;
        case CEJ_FIELD_TOPIC: status = readString(value, which, out->topic, out); break;
        case CEJ_FIELD_PUSH_TYPE: status = readString(value, which, out->push_type, out); break;
        case CEJ_FIELD_COLLAPSE_ID: status = readString(value, which, out->collapse_id, out); break;
        case CEJ_FIELD_APNS_ID: status = readString(value, which, out->apns_id, out); break;
        case CEJ_FIELD_CHANNEL_ID: status = readString(value, which, out->channel_id, out); break;
        case CEJ_FIELD_APNS_REQUEST_ID: status = readString(value, which, out->apns_request_id, out); break;
        case CEJ_FIELD_ENVIRONMENT: status = readString(value, which, out->environment, out); break;
        case CEJ_FIELD_PRIORITY: status = readInteger(value, which, out->priority, out); break;
        case CEJ_FIELD_EXPIRATION: status = readInteger(value, which, out->expiration, out); break;
        case CEJ_FIELD_PAYLOAD: status = readObject(value, which, out->payload, out); break;
        case CEJ_FIELD_METADATA: status = readObject(value, which, out->metadata, out); break;
        default: status = CEJ_INTERNAL; break;
        }
        if (status != CEJ_OK) return out->status = status;
    }
    if (!atEndAfterRoot()) return out->status = CEJ_INVALID_JSON;
    return out->status = CEJ_OK;
}

extern "C" cej_decoder *cej_decoder_create(void) {
    try {
        return new cej_decoder();
    } catch (...) {
        return nullptr;
    }
}

extern "C" void cej_decoder_destroy(cej_decoder *decoder) { delete decoder; }

extern "C" int32_t cej_decode_event(cej_decoder *decoder, const uint8_t *bytes, size_t len, cej_event *out) {
    if (decoder == nullptr || out == nullptr || (bytes == nullptr && len != 0)) return CEJ_INTERNAL;
    try {
        return decoder->decode(bytes == nullptr ? reinterpret_cast<const uint8_t *>("") : bytes, len, out);
    } catch (...) {
        std::memset(out, 0, sizeof(*out));
        return out->status = CEJ_INTERNAL;
    }
}

extern "C" const char *cej_ondemand_implementation(void) {
    // The on-demand API is compiled into this file for one implementation, chosen by compiler flags.
    return SIMDJSON_STRINGIFY(SIMDJSON_BUILTIN_IMPLEMENTATION);
}
