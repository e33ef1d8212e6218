// Reference JSON Schema validation with valijson 1.0 over nlohmann::json.
//
// This is the slow, independent implementation: it backs `apns-relay validate`, writes the detailed
// error for events the fast decoder refused, and is the oracle of the differential test.
//
// Two traps of valijson 1.0 handled here:
// - `pattern` runs std::regex (libstdc++), whose matcher recurses once per input character: a few
//   thousand characters overflow a 512 KiB stack. valijson checks `maxLength` before `pattern` within a
//   schema and, without a results object, stops at the first failure, so the verdict pass never runs a
//   pattern on a string longer than its maxLength. The detailed pass evaluates every constraint: it runs
//   against a copy of the schema whose patterns skip strings over their maxLength (SchemaPatterns.cpp),
//   so it too runs on the caller's thread with the stack any thread has.
// - nlohmann keeps the last of duplicate member names and skips a byte order mark; both are refused
//   here, as the fast decoder refuses them, by watching the parse through nlohmann's callback.
//
// The struct and the problem record are in SchemaValidatorInternal.h; valijson's messages are put in
// readable terms in SchemaMessages.cpp.
#include "SchemaValidatorInternal.h"

#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema_parser.hpp>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using nlohmann::json;
using cej::Problem;
using cej::escapeToken;

namespace {

char *copyString(const std::string &text) {
    char *copy = static_cast<char *>(std::malloc(text.size() + 1));
    if (copy != nullptr) std::memcpy(copy, text.c_str(), text.size() + 1);
    return copy;
}

/// valijson's context is like ["<root>", "[deviceToken]", "[0]"]; turn it into "/deviceToken/0".
std::string pointerFromContext(const std::vector<std::string> &context) {
    std::string pointer;
    for (const auto &part : context) {
        if (part == "<root>") continue;
        std::string token = part;
        if (token.size() >= 2 && token.front() == '[' && token.back() == ']') token = token.substr(1, token.size() - 2);
        pointer += "/" + escapeToken(token);
    }
    return pointer;
}

} // namespace

/// The rules JSON Schema cannot express; the same ones the fast decoder enforces.
bool cej_schema::parse(const uint8_t *bytes, size_t len, json &out, std::vector<Problem> &problems) {
    if (len > CEJ_MAX_EVENT_BYTES) {
        problems.push_back({"", "event is " + std::to_string(len) + " bytes; at most " +
                                    std::to_string(CEJ_MAX_EVENT_BYTES) + " allowed"});
        return false;
    }
    if (len >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF) {
        problems.push_back({"", "invalid JSON: starts with a byte order mark"});
        return false;
    }
    // nlohmann stops at a NUL byte as if the input ended there; a raw NUL is never valid JSON.
    if (std::memchr(bytes, 0, len) != nullptr) {
        problems.push_back({"", "invalid JSON: contains a NUL byte"});
        return false;
    }
    bool tooDeep = false;
    std::string duplicate;
    std::set<std::string> topLevelKeys;
    json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json &parsed) {
        switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start:
            // `depth` is the parent's level; this container is one deeper.
            if (depth + 1 > CEJ_MAX_DEPTH) tooDeep = true;
            break;
        case json::parse_event_t::key:
            if (depth == 1 && parsed.is_string() && duplicate.empty()) {
                if (!topLevelKeys.insert(parsed.get_ref<const std::string &>()).second) {
                    duplicate = parsed.get_ref<const std::string &>();
                }
            }
            break;
        default:
            break;
        }
        return true;
    };
    try {
        out = json::parse(bytes, bytes + len, callback, /*allow_exceptions*/ true, /*ignore_comments*/ false);
    } catch (const json::exception &error) {
        // parse_error, and out_of_range for a number that overflows a double (1e400).
        problems.push_back({"", std::string("invalid JSON: ") + error.what()});
        return false;
    }
    if (tooDeep) {
        problems.push_back({"", "nesting deeper than " + std::to_string(CEJ_MAX_DEPTH) + " levels"});
        return false;
    }
    if (!duplicate.empty()) {
        problems.push_back({"/" + escapeToken(duplicate), "member \"" + duplicate + "\" appears more than once"});
        return false;
    }
    return true;
}

bool cej_schema::verdict(const json &instance) {
    valijson::adapters::NlohmannJsonAdapter adapter(instance);
    std::lock_guard<std::mutex> guard(lock);
    return validator.validate(schema, adapter, nullptr);
}

void cej_schema::details(const json &instance, std::vector<Problem> &problems) {
    valijson::adapters::NlohmannJsonAdapter adapter(instance);
    valijson::ValidationResults results;
    {
        std::lock_guard<std::mutex> guard(lock);
        validator.validate(detailedSchema, adapter, &results);
    }
    std::vector<Problem> all;
    valijson::ValidationResults::Error error;
    while (results.popError(error)) {
        Problem problem{pointerFromContext(error.context), describe(error)};
        translate(problem, error.context, instance);
        all.push_back(problem);
    }
    // valijson adds a summary for each parent ("Failed to validate against schema associated with
    // property name …", "… child schema #0.", a dependency that failed); keep only the specific errors
    // when there are any.
    for (const auto &problem : all) {
        if (problem.message.rfind("Failed to validate against schema associated with property", 0) == 0) continue;
        if (problem.message.rfind("Failed to validate against child schema", 0) == 0) continue;
        if (problem.message.rfind("breaks a rule the schema sets for events with these members", 0) == 0) continue;
        problems.push_back(problem);
    }
    if (problems.empty()) problems = all;
    if (problems.empty()) problems.push_back({"", "does not match the schema"});
}

extern "C" cej_schema *cej_schema_create(const char *schema_json, size_t len, char **error_out) {
    if (error_out != nullptr) *error_out = nullptr;
    try {
        auto *schema = new cej_schema();
        try {
            schema->document = json::parse(schema_json, schema_json + len);
            valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
            valijson::adapters::NlohmannJsonAdapter adapter(schema->document);
            parser.populateSchema(adapter, schema->schema);
            schema->compileDetailed();
        } catch (const std::exception &error) {
            delete schema;
            if (error_out != nullptr) *error_out = copyString(std::string("invalid schema: ") + error.what());
            return nullptr;
        }
        return schema;
    } catch (...) {
        if (error_out != nullptr) *error_out = copyString("out of memory compiling the schema");
        return nullptr;
    }
}

extern "C" void cej_schema_destroy(cej_schema *schema) { delete schema; }

extern "C" int32_t cej_schema_validate(
    cej_schema *schema, const uint8_t *bytes, size_t len, int32_t detailed,
    cej_schema_error **errors_out, size_t *count_out) {
    if (errors_out != nullptr) *errors_out = nullptr;
    if (count_out != nullptr) *count_out = 0;
    if (schema == nullptr || (bytes == nullptr && len != 0)) return -1;
    if (bytes == nullptr) bytes = reinterpret_cast<const uint8_t *>("");
    try {
        std::vector<Problem> problems;
        json instance;
        if (schema->parse(bytes, len, instance, problems)) {
            if (schema->verdict(instance)) return 0;
            if (detailed) {
                try {
                    schema->details(instance, problems);
                } catch (...) {
                    problems.clear();
                    problems.push_back({"", "does not match the schema (details unavailable)"});
                }
            } else {
                problems.push_back({"", "does not match the schema"});
            }
        }
        if (detailed && errors_out != nullptr && count_out != nullptr) {
            auto *errors = static_cast<cej_schema_error *>(std::calloc(problems.size(), sizeof(cej_schema_error)));
            if (errors == nullptr) return -1;
            for (size_t i = 0; i < problems.size(); ++i) {
                errors[i].pointer = copyString(problems[i].pointer);
                errors[i].message = copyString(problems[i].message);
            }
            *errors_out = errors;
            *count_out = problems.size();
        }
        return static_cast<int32_t>(problems.size());
    } catch (...) {
        return -1;
    }
}

extern "C" void cej_schema_errors_free(cej_schema_error *errors, size_t count) {
    if (errors == nullptr) return;
    for (size_t i = 0; i < count; ++i) {
        std::free(errors[i].pointer);
        std::free(errors[i].message);
    }
    std::free(errors);
}

extern "C" uint64_t cej_schema_pattern_evaluations(cej_schema *schema) {
    return schema == nullptr ? 0 : schema->patternEvaluations.load(std::memory_order_relaxed);
}

extern "C" void cej_free(void *pointer) { std::free(pointer); }
