// The reference validator's shared declarations: `struct cej_schema` (opaque in CEventJSON.h) and the
// problem record its passes produce. Private to the validator's files, not part of the public API:
// SchemaValidator.cpp (parsing, the verdict and detailed passes, the C API), SchemaPatterns.cpp (the
// detailed pass's schema, with `pattern` bounded by `maxLength`) and SchemaMessages.cpp (valijson's
// messages in the event contract's terms).
#ifndef CEVENTJSON_SCHEMA_VALIDATOR_INTERNAL_H
#define CEVENTJSON_SCHEMA_VALIDATOR_INTERNAL_H

#include "CEventJSON.h"

#include <nlohmann/json.hpp>
#include <valijson/schema.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace cej {

struct Problem {
    std::string pointer;
    std::string message;
};

/// JSON pointer escaping of one reference token (RFC 6901).
inline std::string escapeToken(const std::string &token) {
    std::string out;
    for (char c : token) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else out += c;
    }
    return out;
}

/// One `pattern` of the detailed pass's schema, with the `maxLength` that bounds the strings it runs on
/// (see SchemaPatterns.cpp).
struct PatternRule {
    std::shared_ptr<const std::regex> regex;
    std::optional<uint64_t> maxLength;
    /// Under `not`: a string it skips counts as not matching, so the `not` adds no problem.
    bool negated = false;
};

} // namespace cej

struct cej_schema {
    nlohmann::json document;
    /// The schema as written: the verdict pass.
    valijson::Schema schema;
    /// The schema with every `pattern` bounded by its `maxLength`: the detailed pass (SchemaPatterns.cpp).
    valijson::Schema detailedSchema;
    /// The bounded patterns `detailedSchema` refers to, by index; never resized after `compileDetailed`.
    std::vector<std::unique_ptr<cej::PatternRule>> patterns;
    /// How many times the detailed pass ran a pattern: what tests read to see a pattern skipped.
    std::atomic<uint64_t> patternEvaluations{0};
    valijson::Validator validator{valijson::Validator::kStrongTypes};
    std::mutex lock;

    // Defined in SchemaPatterns.cpp: builds `detailedSchema` and `patterns` from `document`.
    void compileDetailed();

    // Defined in SchemaValidator.cpp.
    bool parse(const uint8_t *bytes, size_t len, nlohmann::json &out, std::vector<cej::Problem> &problems);
    bool verdict(const nlohmann::json &instance);
    void details(const nlohmann::json &instance, std::vector<cej::Problem> &problems);

    // Defined in SchemaMessages.cpp (used by details).
    const nlohmann::json *schemaAt(const std::vector<std::string> &context) const;
    void translate(cej::Problem &problem, const std::vector<std::string> &context, const nlohmann::json &instance) const;
    std::string describe(const valijson::ValidationResults::Error &error);

    /// A rule of the root schema's `dependencies` that applies to `instance` (its key is present) and that
    /// `matches` one of its `properties`: the dependency key, the member, the member's subschema and the
    /// dependency's description. `context` is where a property error was reported (its last part names
    /// the member); empty to consider every member.
    struct DependentRule {
        std::string first;
        std::string member;
        const nlohmann::json *second;
        const std::string *description;
    };
    // Defined in SchemaMessages.cpp, the only file that uses it.
    template <typename Matches>
    std::optional<DependentRule> dependentRule(
        const std::vector<std::string> &context, const nlohmann::json &instance, Matches matches) const;
};

#endif // CEVENTJSON_SCHEMA_VALIDATOR_INTERNAL_H
