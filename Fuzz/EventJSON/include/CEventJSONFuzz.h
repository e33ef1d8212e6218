#ifndef APNS_RELAY_CEVENTJSONFUZZ_H
#define APNS_RELAY_CEVENTJSONFUZZ_H
// The `event-json` fuzz target's one entry: what a single input does to the C API of CEventJSON (decoder,
// reference validator, salvage). The libFuzzer binary (Fuzz/Drivers/event_json_fuzzer.cpp) and the corpus
// replay in `make test` (Tests/FuzzCorpusTests) both call it, so the replay runs exactly what was fuzzed.
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct cej_fuzz_context cej_fuzz_context;

/// A decoder and the compiled notification-event schema, made once per process.
/// Returns NULL (and writes why to standard error) when the schema does not compile.
cej_fuzz_context *cej_fuzz_context_create(const char *schema_json, size_t len);
void cej_fuzz_context_destroy(cej_fuzz_context *context);

/// Decodes, validates (verdict and detailed pass) and salvages `data`. Aborts, after a line on standard error,
/// when a documented guarantee of CEventJSON.h does not hold (e.g. a payload range outside the input, or the
/// detailed pass disagreeing with the verdict); returns 0 otherwise.
int cej_fuzz_event_json(cej_fuzz_context *context, const uint8_t *data, size_t size);

#ifdef __cplusplus
}
#endif
#endif
