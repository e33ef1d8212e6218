// libFuzzer driver of the `event-json` target (built by Fuzz/fuzz.sh with clang++ -fsanitize=fuzzer,address,undefined
// straight against Sources/CEventJSON/*.cpp). The logic is Fuzz/EventJSON/EventJSONFuzz.cpp, shared with the replay.
#include "CEventJSONFuzz.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#ifndef APNS_RELAY_EVENT_SCHEMA
#error "define APNS_RELAY_EVENT_SCHEMA as the path of Schemas/notification-event.schema.json"
#endif

static cej_fuzz_context *context;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    std::ifstream file(APNS_RELAY_EVENT_SCHEMA);
    std::stringstream schema;
    schema << file.rdbuf();
    std::string text = schema.str();
    context = cej_fuzz_context_create(text.data(), text.size());
    if (context == nullptr) {
        std::fprintf(stderr, "cannot compile %s\n", APNS_RELAY_EVENT_SCHEMA);
        std::exit(1);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return cej_fuzz_event_json(context, data, size);
}
