// The `event-json` fuzz target: one input through the three C entry points of CEventJSON, each the way the
// relay calls it (EventDecoder, SchemaValidator, SalvagedEvent), plus the guarantees CEventJSON.h documents.
//
// A crash is only half of what fuzzing finds: the checks below turn a broken promise (a range outside the
// input, a verdict the detailed pass contradicts, the fast decoder refusing what the reference accepts) into
// an abort, so libFuzzer keeps the input like any crash. Each check follows from the header's contract or from
// the decoder being a subset of the schema's rules; none compares against what the code happens to do.
#include "CEventJSONFuzz.h"

#include "CEventJSON.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

struct cej_fuzz_context {
    cej_decoder *decoder = nullptr;
    cej_schema *schema = nullptr;
};

namespace {

[[noreturn]] void violated(const char *what) {
    std::fprintf(stderr, "event-json fuzz target: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

/// Reads every byte of `length` bytes at `text`, so ASan reports a string that does not live that long.
size_t touch(const char *text, size_t length) {
    volatile size_t sum = 0;
    for (size_t i = 0; i < length; ++i) sum += static_cast<unsigned char>(text[i]);
    return sum;
}

void checkString(const cej_string &string) {
    if (string.ptr == nullptr && string.len != 0) violated("a string with a length but no text");
    if (string.ptr != nullptr) touch(string.ptr, string.len);
}

/// A payload or metadata range: inside the input, and the whole object's text (first `{`, last `}`).
std::string_view checkRange(const cej_range &range, const uint8_t *data, size_t size, const char *name) {
    if (range.offset > size || range.len > size - range.offset) violated(name);
    if (range.len < 2 || data[range.offset] != '{' || data[range.offset + range.len - 1] != '}') violated(name);
    return {reinterpret_cast<const char *>(data) + range.offset, range.len};
}

/// The salvage outputs are malloc'd, NUL-terminated at their length.
void checkSalvaged(const char *text, size_t length) {
    if (text == nullptr) {
        if (length != 0) violated("salvage: a length without text");
        return;
    }
    touch(text, length + 1);
    if (text[length] != '\0') violated("salvage: output not NUL-terminated at its length");
}

std::string_view text(const cej_string &string) { return {string.ptr == nullptr ? "" : string.ptr, string.len}; }

} // namespace

extern "C" cej_fuzz_context *cej_fuzz_context_create(const char *schema_json, size_t len) {
    auto *context = new cej_fuzz_context();
    char *error = nullptr;
    context->schema = cej_schema_create(schema_json, len, &error);
    context->decoder = cej_decoder_create();
    if (context->schema == nullptr || context->decoder == nullptr) {
        std::fprintf(stderr, "event-json fuzz target: %s\n", error != nullptr ? error : "cannot create the decoder");
        cej_free(error);
        cej_fuzz_context_destroy(context);
        return nullptr;
    }
    return context;
}

extern "C" void cej_fuzz_context_destroy(cej_fuzz_context *context) {
    if (context == nullptr) return;
    cej_schema_destroy(context->schema);
    cej_decoder_destroy(context->decoder);
    delete context;
}

extern "C" int cej_fuzz_event_json(cej_fuzz_context *context, const uint8_t *data, size_t size) {
    // MARK: Fast decoder (EventDecoder.decode)
    cej_event event;
    int32_t status = cej_decode_event(context->decoder, data, size, &event);
    if (status != event.status) violated("decoder: returned status differs from out->status");
    if (status < CEJ_OK || status > CEJ_INTERNAL) violated("decoder: status outside the documented codes");
    if (status == CEJ_INTERNAL) violated("decoder: internal error on input (only out-of-memory may say that)");
    if ((size > CEJ_MAX_EVENT_BYTES) != (status == CEJ_TOO_LARGE)) violated("decoder: size limit not applied as documented");
    checkString(event.error_key);
    const bool decoded = status == CEJ_OK;
    if (decoded) {
        if (event.error_field != 0) violated("decoder: an error field on success");
        for (const cej_string *field : {&event.id, &event.device_token, &event.topic, &event.push_type, &event.collapse_id,
                                        &event.apns_id, &event.environment, &event.channel_id, &event.apns_request_id}) {
            checkString(*field);
        }
        if (event.present & CEJ_FIELD_PAYLOAD) checkRange(event.payload, data, size, "decoder: payload range is not the object's text");
        if (event.present & CEJ_FIELD_METADATA) checkRange(event.metadata, data, size, "decoder: metadata range is not the object's text");
    }

    // MARK: Reference validator (SchemaValidator.isValid, then .validate as the explainer of a refusal)
    int32_t verdict = cej_schema_validate(context->schema, data, size, 0, nullptr, nullptr);
    if (verdict < 0) violated("validator: internal failure on input");
    cej_schema_error *errors = nullptr;
    size_t count = 0;
    int32_t detailed = cej_schema_validate(context->schema, data, size, 1, &errors, &count);
    if (detailed < 0) violated("validator: internal failure in the detailed pass");
    if (static_cast<size_t>(detailed) != count) violated("validator: returned count differs from *count_out");
    if ((verdict == 0) != (detailed == 0)) violated("validator: the detailed pass contradicts the verdict");
    for (size_t i = 0; i < count; ++i) {
        if (errors[i].pointer == nullptr || errors[i].message == nullptr) violated("validator: an error without pointer or message");
        touch(errors[i].pointer, std::strlen(errors[i].pointer));
        std::string_view message = errors[i].message;
        // What the decoder accepted is JSON within the relay's own limits: the reference must not say otherwise.
        if (decoded && (message.rfind("invalid JSON", 0) == 0 || message.rfind("nesting deeper than", 0) == 0 ||
                        message.find("appears more than once") != std::string_view::npos || message.rfind("event is ", 0) == 0)) {
            violated("decoder accepted what the validator calls malformed");
        }
    }
    cej_schema_errors_free(errors, count);
    // The decoder checks a subset of the schema (syntax, size, depth, keys, types): it accepts all that is valid.
    if (verdict == 0 && !decoded) violated("validator accepts an event the decoder refuses");

    // MARK: Salvage (SalvagedEvent, for refused events; any input must be safe)
    char *id = nullptr;
    char *metadata = nullptr;
    size_t idLength = 0;
    size_t metadataLength = 0;
    cej_salvage_event(data, size, &id, &idLength, &metadata, &metadataLength);
    checkSalvaged(id, idLength);
    checkSalvaged(metadata, metadataLength);
    if (metadata != nullptr && (metadataLength < 2 || metadata[0] != '{' || metadata[metadataLength - 1] != '}')) {
        violated("salvage: metadata is not an object's text");
    }
    if (decoded) {
        // Both parse the same JSON: the unescaped id and the compact metadata must agree.
        if ((event.present & CEJ_FIELD_ID) && (id == nullptr || std::string_view(id, idLength) != text(event.id))) {
            violated("salvage and decoder read different ids");
        }
        if (event.present & CEJ_FIELD_METADATA) {
            std::string_view slice = checkRange(event.metadata, data, size, "decoder: metadata range");
            std::string compact = nlohmann::json::parse(slice.begin(), slice.end(), nullptr, false).dump();
            if (metadata == nullptr || std::string_view(metadata, metadataLength) != compact) {
                violated("salvage and decoder read different metadata");
            }
        }
    }
    cej_free(id);
    cej_free(metadata);
    return 0;
}
