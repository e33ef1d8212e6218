// `pattern` for the reference validator's detailed pass, bounded by the string's own `maxLength`.
//
// libstdc++'s std::regex recurses once per character it matches: measured here, 330–530 bytes of stack
// and 0.1–0.2 µs per character for the event schema's patterns (a 60,000-character device token: 22 MiB of
// stack and 115 ms for `^([0-9a-fA-F]{2})+$`). The verdict pass never meets that, because valijson stops
// at the first failure and checks `maxLength` before `pattern`. The detailed pass evaluates every
// constraint, so valijson's own `pattern` would run on a string that already failed its `maxLength`.
//
// So the detailed pass validates against a copy of the schema in which each `pattern` is a custom
// constraint (`BoundedPattern`) that knows the `maxLength` of its subschema (or, inside `not`, of the
// subschema that negates it) and skips a string longer than that: the string is reported by `maxLength`
// already, and a pattern problem on top of it says nothing new. A pattern with no such bound skips strings
// longer than `kMaxPatternCharacters`, so the pass never needs more than the default thread stack (at most
// ~400 KiB); the event schema bounds every pattern it has (at most 400 characters, ~160 KiB of stack).
//
// Skipping never changes a verdict: the detailed pass runs only on documents the verdict pass refused, and
// a skipped string is over a `maxLength` that fails its subschema anyway.
#include "SchemaValidatorInternal.h"

#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/constraint_builder.hpp>
#include <valijson/constraints/concrete_constraints.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/utils/utf8_utils.hpp>

#include <atomic>
#include <memory>
#include <new>
#include <regex>
#include <string>
#include <vector>

using nlohmann::json;

namespace {

/// The longest string a pattern without a `maxLength` is run on in the detailed pass (see the file comment:
/// ~390 KiB of stack for the event schema's costliest pattern, under the 512 KiB of the smallest thread
/// stacks a caller may have).
constexpr uint64_t kMaxPatternCharacters = 1024;

/// The schema keyword the rewritten schema uses in place of `pattern`; its value indexes `cej_schema::patterns`.
constexpr const char *kBoundedPatternKeyword = "x-apns-relay-bounded-pattern";

class BoundedPattern final : public valijson::constraints::PolyConstraint {
public:
    BoundedPattern(const cej::PatternRule *rule, std::atomic<uint64_t> *evaluations)
        : rule_(rule), evaluations_(evaluations) {}

    bool validate(const valijson::adapters::Adapter &target, const std::vector<std::string> &context,
                  valijson::ValidationResults *results) const override {
        // As valijson's `pattern` with strong types: it applies to strings only.
        if (!target.isString()) return true;
        const std::string text = target.asString();
        const uint64_t length = valijson::utils::u8_strlen(text.c_str());
        const uint64_t bound = rule_->maxLength.value_or(kMaxPatternCharacters);
        if (length > bound || length > kMaxPatternCharacters) {
            // Not evaluated: what leaves no problem of its own. Inside `not` that is a failed match
            // (the `not` then holds), elsewhere a passed one.
            return !rule_->negated;
        }
        evaluations_->fetch_add(1, std::memory_order_relaxed);
        if (std::regex_search(text, *rule_->regex)) return true;
        // valijson's own wording, which `cej_schema::describe` puts in the contract's terms.
        if (results != nullptr) results->pushError(context, "Failed to match regex specified by 'pattern' constraint.");
        return false;
    }

private:
    Constraint *cloneInto(void *memory) const override { return new (memory) BoundedPattern(*this); }
    size_t sizeOf() const override { return sizeof(BoundedPattern); }

    /// Owned by the `cej_schema`, which outlives every schema built from it.
    const cej::PatternRule *rule_;
    std::atomic<uint64_t> *evaluations_;
};

class BoundedPatternBuilder final : public valijson::ConstraintBuilder {
public:
    explicit BoundedPatternBuilder(cej_schema *schema) : schema_(schema) {}

    valijson::constraints::Constraint *make(const valijson::adapters::Adapter &value) const override {
        int64_t index = -1;
        if (!value.getInteger(index) || index < 0 || static_cast<size_t>(index) >= schema_->patterns.size()) {
            throw std::runtime_error("bad bounded pattern index");
        }
        return new BoundedPattern(schema_->patterns[static_cast<size_t>(index)].get(), &schema_->patternEvaluations);
    }

private:
    cej_schema *schema_;
};

/// Keywords whose values are data, never subschemas: a `pattern` member inside them is left alone.
bool holdsData(const std::string &keyword) {
    return keyword == "enum" || keyword == "const" || keyword == "default" || keyword == "examples";
}

/// Keywords whose values map names to subschemas: a member named `not` or `pattern` there is a name.
bool mapsNames(const std::string &keyword) {
    return keyword == "properties" || keyword == "patternProperties" || keyword == "definitions" ||
           keyword == "dependencies";
}

/// Replaces every `pattern` in `node` (a subschema, or a map or list of them) by a bounded one. `inherited`:
/// the `maxLength` of the subschema whose `not` this is, if any; `negated` whether `node` sits under an odd
/// number of such `not`s.
void bound(json &node, std::vector<std::unique_ptr<cej::PatternRule>> &rules, std::optional<uint64_t> inherited,
           bool negated) {
    if (node.is_array()) {
        for (auto &item : node) bound(item, rules, std::nullopt, false);
        return;
    }
    if (!node.is_object()) return;
    std::optional<uint64_t> maxLength = inherited;
    auto ownMax = node.find("maxLength");
    if (ownMax != node.end() && ownMax->is_number_unsigned()) maxLength = ownMax->get<uint64_t>();
    else if (ownMax != node.end() && ownMax->is_number_integer() && ownMax->get<int64_t>() >= 0)
        maxLength = static_cast<uint64_t>(ownMax->get<int64_t>());
    auto pattern = node.find("pattern");
    if (pattern != node.end() && pattern->is_string()) {
        auto rule = std::make_unique<cej::PatternRule>();
        rule->regex = std::make_shared<const std::regex>(pattern->get<std::string>());
        rule->maxLength = maxLength;
        rule->negated = negated;
        rules.push_back(std::move(rule));
        node.erase(pattern);
        node[kBoundedPatternKeyword] = rules.size() - 1;
    }
    for (auto member = node.begin(); member != node.end(); ++member) {
        if (holdsData(member.key())) continue;
        if (member.key() == "not") {
            bound(member.value(), rules, maxLength, !negated);
        } else if (mapsNames(member.key()) && member.value().is_object()) {
            for (auto &subschema : member.value()) bound(subschema, rules, std::nullopt, false);
        } else {
            bound(member.value(), rules, std::nullopt, false);
        }
    }
}

} // namespace

void cej_schema::compileDetailed() {
    json bounded = document;
    bound(bounded, patterns, std::nullopt, false);
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    // The parser owns the builder from here on.
    parser.addConstraintBuilder(kBoundedPatternKeyword, new BoundedPatternBuilder(this));
    valijson::adapters::NlohmannJsonAdapter adapter(bounded);
    parser.populateSchema(adapter, detailedSchema);
}
