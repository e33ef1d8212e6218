// Reference JSON Schema validation with valijson 1.0 over nlohmann::json.
//
// This is the slow, independent implementation: it backs `apns-relay validate`, writes the detailed
// error for events the fast decoder refused, and is the oracle of the differential test.
//
// Two traps of valijson 1.0 handled here:
// - `pattern` runs std::regex (libstdc++), whose matcher recurses once per input character: a few
//   thousand characters overflow a 512 KiB stack. valijson checks `maxLength` before `pattern` within a
//   schema and, without a results object, stops at the first failure, so the verdict pass never runs a
//   pattern on a string longer than its maxLength. The detailed pass evaluates every constraint, so it
//   runs on a thread with a stack sized for the longest possible string (events are at most 64 KiB).
// - nlohmann keeps the last of duplicate member names and skips a byte order mark; both are refused
//   here, as the fast decoder refuses them, by watching the parse through nlohmann's callback.
#include "CEventJSON.h"

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include <pthread.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

using nlohmann::json;

namespace {

struct Problem {
    std::string pointer;
    std::string message;
};

char *copyString(const std::string &text) {
    char *copy = static_cast<char *>(std::malloc(text.size() + 1));
    if (copy != nullptr) std::memcpy(copy, text.c_str(), text.size() + 1);
    return copy;
}

/// JSON pointer escaping of one reference token (RFC 6901).
std::string escapeToken(const std::string &token) {
    std::string out;
    for (char c : token) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else out += c;
    }
    return out;
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

/// Stack for the detailed pass: libstdc++'s regex needs a few hundred bytes per character matched.
constexpr size_t kDetailedStackBytes = 256u * 1024u * 1024u;

} // namespace

struct cej_schema {
    json document;
    valijson::Schema schema;
    valijson::Validator validator{valijson::Validator::kStrongTypes};
    std::mutex lock;

    /// The rules JSON Schema cannot express; the same ones the fast decoder enforces.
    bool parse(const uint8_t *bytes, size_t len, json &out, std::vector<Problem> &problems) {
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

    bool verdict(const json &instance) {
        valijson::adapters::NlohmannJsonAdapter adapter(instance);
        std::lock_guard<std::mutex> guard(lock);
        return validator.validate(schema, adapter, nullptr);
    }

    void details(const json &instance, std::vector<Problem> &problems) {
        valijson::adapters::NlohmannJsonAdapter adapter(instance);
        valijson::ValidationResults results;
        {
            std::lock_guard<std::mutex> guard(lock);
            validator.validate(schema, adapter, &results);
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

    /// The schema node that constrains the value at `context` (following `properties`, `items` and local
    /// `$ref`s), or null where the path leaves what the schema spells out.
    const json *schemaAt(const std::vector<std::string> &context) const {
        const json *node = &document;
        auto resolve = [this](const json *n) -> const json * {
            for (int hops = 0; n && n->is_object() && n->contains("$ref") && hops < 8; ++hops) {
                const auto &ref = (*n)["$ref"];
                if (!ref.is_string() || ref.get<std::string>().rfind("#/", 0) != 0) return nullptr;
                try {
                    n = &document.at(json::json_pointer(ref.get<std::string>().substr(1)));
                } catch (...) {
                    return nullptr;
                }
            }
            return n;
        };
        node = resolve(node);
        for (const auto &part : context) {
            if (part == "<root>") continue;
            if (!node || !node->is_object()) return nullptr;
            std::string token = part;
            if (token.size() >= 2 && token.front() == '[' && token.back() == ']') token = token.substr(1, token.size() - 2);
            if (token.size() >= 2 && token.front() == '"' && token.back() == '"') token = token.substr(1, token.size() - 2);
            auto properties = node->find("properties");
            if (properties != node->end() && properties->is_object() && properties->contains(token)) {
                node = resolve(&(*properties)[token]);
            } else if (node->contains("items") && (*node)["items"].is_object()) {
                node = resolve(&(*node)["items"]);
            } else {
                return nullptr;
            }
        }
        return node;
    }

    static std::string typeName(const json &value) {
        switch (value.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::string: return "a string";
        case json::value_t::array: return "an array";
        case json::value_t::object: return "an object";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "an integer";
        default: return "a number";
        }
    }

    static std::string schemaTypeName(const std::string &type) {
        if (type == "integer" || type == "array" || type == "object") return "an " + type;
        if (type == "null") return "null";
        return "a " + type;
    }

    /// valijson's wording ("Failed to match against any enum values.", "Value type not permitted by 'type'
    /// constraint.", "Object contains a property that could not be validated …") in the event contract's
    /// terms: the allowed values, the expected and actual type, the unknown member (and its pointer).
    void translate(Problem &problem, const std::vector<std::string> &context, const json &instance) const {
        const std::string &message = problem.message;
        const json *node = schemaAt(context);
        const json *value = nullptr;
        try {
            value = &instance.at(json::json_pointer(problem.pointer));
        } catch (...) {
            value = nullptr;
        }
        auto startsWith = [&](const char *prefix) { return message.rfind(prefix, 0) == 0; };
        auto number = [&](const char *prefix) {
            std::string rest = message.substr(std::strlen(prefix));
            size_t end = 0;
            while (end < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[end])) || rest[end] == '.' || rest[end] == '-')) ++end;
            std::string n = rest.substr(0, end);
            if (n.size() > 2 && n.substr(n.size() - 2) == ".0") n = n.substr(0, n.size() - 2);
            return n;
        };
        if (message == "Failed to match against any enum values.") {
            if (node && node->contains("enum") && (*node)["enum"].is_array()) {
                std::string allowed;
                for (const auto &option : (*node)["enum"]) allowed += (allowed.empty() ? "" : ", ") + option.dump();
                problem.message = "must be one of " + allowed;
            } else {
                problem.message = "is not one of the allowed values";
            }
            if (value) problem.message += " (it is " + value->dump() + ")";
        } else if (message == "Value type not permitted by 'type' constraint.") {
            std::string expected;
            if (node && node->contains("type")) {
                const auto &type = (*node)["type"];
                if (type.is_string()) expected = schemaTypeName(type.get<std::string>());
                if (type.is_array()) {
                    for (const auto &t : type) {
                        if (t.is_string()) expected += (expected.empty() ? "" : " or ") + schemaTypeName(t.get<std::string>());
                    }
                }
            }
            problem.message = expected.empty() ? "has a type the schema does not allow" : "must be " + expected;
            if (value) problem.message += ", not " + typeName(*value);
        } else if (startsWith("Object contains a property that could not be validated")) {
            auto close = message.rfind('\'');
            auto open = close == std::string::npos || close == 0 ? std::string::npos : message.rfind('\'', close - 1);
            if (open != std::string::npos) {
                std::string name = message.substr(open + 1, close - open - 1);
                problem.pointer += "/" + escapeToken(name);
                problem.message = "unknown member \"" + name + "\" (the schema allows no other members)";
            }
        } else if (startsWith("Missing required property '")) {
            std::string name = message.substr(std::strlen("Missing required property '"));
            if (!name.empty() && name.back() == '.') name.pop_back();
            if (!name.empty() && name.back() == '\'') name.pop_back();
            problem.message = "required member \"" + name + "\" is missing";
        } else if (startsWith("String should be no more than ")) {
            problem.message = "must be at most " + number("String should be no more than ") + " characters long";
        } else if (startsWith("String should be no fewer than ")) {
            problem.message = "must be at least " + number("String should be no fewer than ") + " characters long";
        } else if (startsWith("Expected number greater than or equal to ")) {
            problem.message = "must be at least " + number("Expected number greater than or equal to ");
        } else if (startsWith("Expected number less than or equal to ")) {
            problem.message = "must be at most " + number("Expected number less than or equal to ");
        } else if (startsWith("Expected number greater than ")) {
            problem.message = "must be more than " + number("Expected number greater than ");
        } else if (startsWith("Expected number less than ")) {
            problem.message = "must be less than " + number("Expected number less than ");
        } else if (startsWith("Array should contain no fewer than ")) {
            problem.message = "must have at least " + number("Array should contain no fewer than ") + " items";
        } else if (startsWith("Array should contain no more than ")) {
            problem.message = "must have at most " + number("Array should contain no more than ") + " items";
        } else if (startsWith("Object should have no fewer than ")) {
            problem.message = "must have at least " + number("Object should have no fewer than ") + " members";
        } else if (startsWith("Object should have no more than ")) {
            problem.message = "must have at most " + number("Object should have no more than ") + " members";
        } else if (message == "Failed to match expected value set by 'const' constraint.") {
            if (node && node->contains("const")) {
                problem.message = "must be " + (*node)["const"].dump();
            } else if (auto rule = dependentRule(context, instance, [](const std::string &, const json &sub) { return sub.is_object() && sub.contains("const"); })) {
                problem.message = "must be " + rule->second->at("const").dump() + " when \"" + rule->first + "\" is given";
            } else {
                problem.message = "is not the value the schema requires";
            }
        } else if (message == "Failed to validate against dependent schema.") {
            // A member a dependency forbids (`"member": false`) gets no error of its own from valijson: name it.
            const json *object = value;
            auto forbidden = dependentRule({}, object ? *object : json(), [object](const std::string &name, const json &sub) {
                return sub.is_boolean() && !sub.get<bool>() && object && object->is_object() && object->contains(name);
            });
            if (forbidden) {
                problem.pointer += "/" + escapeToken(forbidden->member);
                problem.message = "is not allowed together with \"" + forbidden->first + "\"";
                if (forbidden->description) problem.message += " (" + *forbidden->description + ")";
            } else {
                problem.message = "breaks a rule the schema sets for events with these members (see the other problems)";
            }
        } else if (message == "Failed to validate against any schemas allowed by anyOf constraint.") {
            problem.message = "matches none of the forms the schema allows here";
            std::string titles;
            if (node && node->contains("anyOf") && (*node)["anyOf"].is_array()) {
                for (const auto &form : (*node)["anyOf"]) {
                    if (form.is_object() && form.contains("title") && form["title"].is_string()) {
                        titles += (titles.empty() ? "" : ", or ") + form["title"].get<std::string>();
                        if (form.contains("required") && form["required"].is_array() && form["required"].size() == 1)
                            titles += " (with \"" + form["required"][0].get<std::string>() + "\")";
                    }
                }
            }
            if (!titles.empty()) problem.message += ": " + titles;
        } else if (message == "Failed to validate against exactly one child schema.") {
            problem.message = "must match exactly one of the forms the schema allows here";
        } else if (message == "Failed to validate against a conditional schema set by if-then-else constraints.") {
            problem.message = "breaks a rule the schema sets for this combination of members (see the other problems)";
        }
    }

    /// A rule of the root schema's `dependencies` that applies to `instance` (its key is present) and that
    /// `matches` one of its `properties`: the dependency key, the member, the member's subschema and the
    /// dependency's description. `context` is where a property error was reported (its last part names
    /// the member); empty to consider every member.
    struct DependentRule {
        std::string first;
        std::string member;
        const json *second;
        const std::string *description;
    };
    template <typename Matches>
    std::optional<DependentRule> dependentRule(const std::vector<std::string> &context, const json &instance, Matches matches) const {
        auto dependencies = document.find("dependencies");
        if (dependencies == document.end() || !dependencies->is_object()) return std::nullopt;
        std::string only;
        if (!context.empty()) {
            only = context.back();
            if (only.size() >= 2 && only.front() == '[' && only.back() == ']') only = only.substr(1, only.size() - 2);
            if (only.size() >= 2 && only.front() == '"' && only.back() == '"') only = only.substr(1, only.size() - 2);
        }
        const json *root = &instance;
        for (auto dependency = dependencies->begin(); dependency != dependencies->end(); ++dependency) {
            if (!dependency->is_object()) continue;
            if (!(root->is_object() && root->contains(dependency.key()))) continue;
            auto properties = dependency->find("properties");
            if (properties == dependency->end() || !properties->is_object()) continue;
            for (auto property = properties->begin(); property != properties->end(); ++property) {
                if (!only.empty() && property.key() != only) continue;
                if (!matches(property.key(), *property)) continue;
                auto description = dependency->find("description");
                const std::string *text = description != dependency->end() && description->is_string()
                    ? description->get_ptr<const std::string *>() : nullptr;
                return DependentRule{dependency.key(), property.key(), &*property, text};
            }
        }
        return std::nullopt;
    }

    /// valijson's message, with the pattern named for a pattern failure of a top-level property.
    std::string describe(const valijson::ValidationResults::Error &error) {
        std::string message = error.description;
        if (message.rfind("Failed to match regex", 0) == 0 && error.context.size() == 2) {
            std::string name = error.context[1];
            if (name.size() >= 2) name = name.substr(1, name.size() - 2);
            auto properties = document.find("properties");
            if (properties != document.end() && properties->is_object()) {
                auto property = properties->find(name);
                if (property != properties->end() && property->is_object()) {
                    auto pattern = property->find("pattern");
                    if (pattern != property->end() && pattern->is_string()) {
                        return "does not match pattern " + pattern->get<std::string>();
                    }
                }
            }
        }
        if (message.find("'not' constraint") != std::string::npos && error.context.size() == 2) {
            std::string name = error.context[1];
            if (name.size() >= 2) name = name.substr(1, name.size() - 2);
            auto properties = document.find("properties");
            if (properties != document.end() && properties->is_object()) {
                auto property = properties->find(name);
                if (property != properties->end() && property->is_object()) {
                    auto negated = property->find("not");
                    if (negated != property->end() && negated->is_object() && negated->contains("pattern")) {
                        return "must not contain a match of " + (*negated)["pattern"].get<std::string>();
                    }
                }
            }
        }
        return message;
    }
};

namespace {

struct DetailedJob {
    cej_schema *schema;
    const json *instance;
    std::vector<Problem> *problems;
    bool failed = false;
};

void *runDetailed(void *argument) {
    auto *job = static_cast<DetailedJob *>(argument);
    try {
        job->schema->details(*job->instance, *job->problems);
    } catch (...) {
        job->failed = true;
    }
    return nullptr;
}

/// Runs the detailed pass on a thread with a large stack (see the file comment).
bool detailedOnLargeStack(cej_schema *schema, const json &instance, std::vector<Problem> &problems) {
    DetailedJob job{schema, &instance, &problems};
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0) return false;
    pthread_attr_setstacksize(&attributes, kDetailedStackBytes);
    pthread_t thread;
    int created = pthread_create(&thread, &attributes, runDetailed, &job);
    pthread_attr_destroy(&attributes);
    if (created != 0) return false;
    pthread_join(thread, nullptr);
    return !job.failed;
}

} // namespace

extern "C" cej_schema *cej_schema_create(const char *schema_json, size_t len, char **error_out) {
    if (error_out != nullptr) *error_out = nullptr;
    try {
        auto *schema = new cej_schema();
        try {
            schema->document = json::parse(schema_json, schema_json + len);
            valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
            valijson::adapters::NlohmannJsonAdapter adapter(schema->document);
            parser.populateSchema(adapter, schema->schema);
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
                if (!detailedOnLargeStack(schema, instance, problems)) {
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

extern "C" void cej_free(void *pointer) { std::free(pointer); }

extern "C" void cej_salvage_event(
    const uint8_t *bytes, size_t len, char **id_out, size_t *id_len, char **metadata_out, size_t *metadata_len) {
    *id_out = nullptr;
    *id_len = 0;
    *metadata_out = nullptr;
    *metadata_len = 0;
    if (bytes == nullptr || len > 1024 * 1024) return;
    try {
        bool tooDeep = false;
        json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json &) {
            if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
                depth + 1 > CEJ_MAX_DEPTH) {
                tooDeep = true;
            }
            return true;
        };
        json document = json::parse(bytes, bytes + len, callback, /*allow_exceptions*/ false);
        if (!document.is_object()) return;
        auto id = document.find("id");
        if (id != document.end() && id->is_string()) {
            const auto &text = id->get_ref<const std::string &>();
            *id_out = static_cast<char *>(std::malloc(text.size() + 1));
            if (*id_out != nullptr) {
                std::memcpy(*id_out, text.data(), text.size() + 1);
                *id_len = text.size();
            }
        }
        // dump() recurses once per level: only for documents within the depth limit.
        auto metadata = document.find("metadata");
        if (!tooDeep && metadata != document.end() && metadata->is_object()) {
            std::string text = metadata->dump();
            *metadata_out = static_cast<char *>(std::malloc(text.size() + 1));
            if (*metadata_out != nullptr) {
                std::memcpy(*metadata_out, text.data(), text.size() + 1);
                *metadata_len = text.size();
            }
        }
    } catch (...) {
        // Salvage is best effort; what was found so far stays.
    }
}
