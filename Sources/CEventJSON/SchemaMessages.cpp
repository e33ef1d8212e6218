// valijson's error messages in the event contract's terms, for the reference validator's detailed pass
// (SchemaValidator.cpp): the allowed values, the expected and actual type, the unknown or forbidden
// member, the pattern that failed. Only the wording and pointers of problems change here, never whether
// an event is valid.
#include "SchemaValidatorInternal.h"

#include <cctype>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using nlohmann::json;
using cej::Problem;
using cej::escapeToken;

namespace {

std::string typeName(const json &value) {
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

std::string schemaTypeName(const std::string &type) {
    if (type == "integer" || type == "array" || type == "object") return "an " + type;
    if (type == "null") return "null";
    return "a " + type;
}

} // namespace

/// The schema node that constrains the value at `context` (following `properties`, `items` and local
/// `$ref`s), or null where the path leaves what the schema spells out.
const json *cej_schema::schemaAt(const std::vector<std::string> &context) const {
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

// The rule and its description: see DependentRule (SchemaValidatorInternal.h).
template <typename Matches>
std::optional<cej_schema::DependentRule> cej_schema::dependentRule(
    const std::vector<std::string> &context, const json &instance, Matches matches) const {
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

/// valijson's wording ("Failed to match against any enum values.", "Value type not permitted by 'type'
/// constraint.", "Object contains a property that could not be validated …") in the event contract's
/// terms: the allowed values, the expected and actual type, the unknown member (and its pointer).
void cej_schema::translate(Problem &problem, const std::vector<std::string> &context, const json &instance) const {
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

/// valijson's message, with the pattern named for a pattern failure of a top-level property.
std::string cej_schema::describe(const valijson::ValidationResults::Error &error) {
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
