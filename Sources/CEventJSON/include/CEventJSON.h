#ifndef APNS_RELAY_CEVENTJSON_H
#define APNS_RELAY_CEVENTJSON_H
// C API of the event JSON target: a fast decoder (simdjson ondemand) for notification events and a
// reference JSON Schema validator (valijson + nlohmann). No C++ exception crosses this boundary.
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/// Returns the simdjson implementation chosen for this CPU (e.g. "haswell"); never NULL.
const char *cej_simdjson_implementation(void);
/// The simdjson implementation the fast decoder was compiled for (e.g. "haswell" or "fallback").
const char *cej_ondemand_implementation(void);

/// Events larger than this many bytes are refused by both the decoder and the validator.
#define CEJ_MAX_EVENT_BYTES 65536
/// Deepest nesting of objects and arrays accepted; the event object itself is level 1.
#define CEJ_MAX_DEPTH 64

// MARK: - Fast decoder

/// Fields of a notification event; `cej_event.present` is a mask of these.
enum {
    CEJ_FIELD_ID = 1u << 0,
    CEJ_FIELD_DEVICE_TOKEN = 1u << 1,
    CEJ_FIELD_TOPIC = 1u << 2,
    CEJ_FIELD_PUSH_TYPE = 1u << 3,
    CEJ_FIELD_PRIORITY = 1u << 4,
    CEJ_FIELD_EXPIRATION = 1u << 5,
    CEJ_FIELD_COLLAPSE_ID = 1u << 6,
    CEJ_FIELD_APNS_ID = 1u << 7,
    CEJ_FIELD_ENVIRONMENT = 1u << 8,
    CEJ_FIELD_PAYLOAD = 1u << 9,
    CEJ_FIELD_METADATA = 1u << 10,
    CEJ_FIELD_CHANNEL_ID = 1u << 11,
    CEJ_FIELD_APNS_REQUEST_ID = 1u << 12,
};

/// Outcome of `cej_decode_event`.
enum {
    CEJ_OK = 0,
    /// Not JSON (syntax, bad escape, control character in a string, trailing data, byte order mark).
    CEJ_INVALID_JSON = 1,
    /// The bytes are not UTF-8.
    CEJ_INVALID_UTF8 = 2,
    /// More than CEJ_MAX_EVENT_BYTES.
    CEJ_TOO_LARGE = 3,
    /// Nesting deeper than CEJ_MAX_DEPTH (error_field names the top-level field).
    CEJ_TOO_DEEP = 4,
    /// A top-level member name appears twice (error_field names it).
    CEJ_DUPLICATE_KEY = 5,
    /// The document is not a JSON object.
    CEJ_NOT_OBJECT = 6,
    /// A top-level member the schema does not allow (error_key holds its unescaped name).
    CEJ_UNKNOWN_KEY = 7,
    /// A field has the wrong JSON type (error_field names it).
    CEJ_WRONG_TYPE = 8,
    /// An integer field does not fit in 64 bits (error_field names it).
    CEJ_INTEGER_OUT_OF_RANGE = 9,
    /// Out of memory or an unexpected library error.
    CEJ_INTERNAL = 10,
};

/// Unescaped UTF-8 text owned by the decoder; valid until the next call on the same decoder.
typedef struct {
    const char *ptr;
    size_t len;
} cej_string;

/// A byte range of the input passed to `cej_decode_event`.
typedef struct {
    size_t offset;
    size_t len;
} cej_range;

typedef struct {
    int32_t status;
    /// Mask of CEJ_FIELD_* present in the event.
    uint32_t present;
    /// The CEJ_FIELD_* an error is about, or 0.
    uint32_t error_field;
    /// With CEJ_UNKNOWN_KEY: the member name.
    cej_string error_key;
    cej_string id, device_token, topic, push_type, collapse_id, apns_id, environment, channel_id, apns_request_id;
    int64_t priority, expiration;
    /// The raw JSON text of `payload` and `metadata`, exactly as in the input.
    cej_range payload, metadata;
} cej_event;

typedef struct cej_decoder cej_decoder;

/// A decoder with its own parser and padded buffer. Not thread-safe: use one per thread or guard it.
/// Returns NULL when out of memory.
cej_decoder *cej_decoder_create(void);
void cej_decoder_destroy(cej_decoder *decoder);

/// Decodes one event. Checks JSON syntax, UTF-8, size, depth, duplicate and unknown top-level keys and
/// JSON types; the schema's value rules (patterns, enums, lengths, ranges, required) are left to the
/// caller. Strings in `out` point into the decoder. Returns `out->status`.
int32_t cej_decode_event(cej_decoder *decoder, const uint8_t *bytes, size_t len, cej_event *out);

// MARK: - Reference validator

typedef struct cej_schema cej_schema;

typedef struct {
    /// JSON pointer of the offending value, e.g. "/deviceToken" ("" is the whole document).
    char *pointer;
    char *message;
} cej_schema_error;

/// Compiles a draft-07 schema. On failure returns NULL and, when `error_out` is not NULL, sets it to a
/// message to release with `cej_free`. Thread-safe to use from several threads (validation is serialised).
cej_schema *cej_schema_create(const char *schema_json, size_t len, char **error_out);
void cej_schema_destroy(cej_schema *schema);

/// Validates one document against the schema plus the relay's extra rules (size, byte order mark,
/// duplicate top-level keys, depth). Returns the number of errors (0 = valid) or -1 on an internal
/// failure. With `detailed` non-zero, `*errors_out` receives an array of `*count_out` errors to release
/// with `cej_schema_errors_free`; otherwise only the verdict is computed.
int32_t cej_schema_validate(
    cej_schema *schema, const uint8_t *bytes, size_t len, int32_t detailed,
    cej_schema_error **errors_out, size_t *count_out);
void cej_schema_errors_free(cej_schema_error *errors, size_t count);
/// How many times detailed validations on `schema` ran a `pattern` (a string over the `maxLength` of its
/// schema is not run against the pattern). For tests and diagnostics.
uint64_t cej_schema_pattern_evaluations(cej_schema *schema);
void cej_free(void *pointer);

// MARK: - Salvage

/// Best effort for a refused event, so its result can still echo the producer's `id` and `metadata`:
/// if `bytes` is a JSON object (any size up to 1 MiB), sets `*id_out` to its top-level "id" when that
/// is a string, and `*metadata_out` to its top-level "metadata" when that is an object nested at most
/// CEJ_MAX_DEPTH levels, re-serialised compactly (not byte-exact). Outputs not found are NULL with
/// length 0. With duplicate names the last wins. Release the outputs with `cej_free`. Never fails hard.
void cej_salvage_event(
    const uint8_t *bytes, size_t len, char **id_out, size_t *id_len, char **metadata_out, size_t *metadata_len);

#ifdef __cplusplus
}
#endif
#endif
