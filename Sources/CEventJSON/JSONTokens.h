// The strict JSON token checks of the fast decoder (EventJSON.cpp): string bodies, numbers, and `walk`,
// which validates every token of a value that simdjson ondemand would otherwise skip. These are the
// rules nlohmann (the reference parser) applies.
//
// Private to EventJSON.cpp, the only file that includes it. Everything here has internal linkage (an
// unnamed namespace) and keeps its original `inline` or non-inline form, so the per-character helpers
// and `walk` compile into the decoder exactly as they did when they lived in EventJSON.cpp (there is no
// LTO; a separate .cpp would turn these hot calls into out-of-line calls).
#ifndef CEVENTJSON_JSON_TOKENS_H
#define CEVENTJSON_JSON_TOKENS_H

#include "CEventJSON.h"

#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

namespace {

inline bool isHex(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

inline unsigned hexValue(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c - 'A' + 10;
}

/// Reads `\uXXXX`'s four digits at p; false if they are not hex.
inline bool readHex4(const uint8_t *p, unsigned &unit) {
    if (!isHex(p[0]) || !isHex(p[1]) || !isHex(p[2]) || !isHex(p[3])) return false;
    unit = (hexValue(p[0]) << 12) | (hexValue(p[1]) << 8) | (hexValue(p[2]) << 4) | hexValue(p[3]);
    return true;
}

/// Checks the body of a JSON string starting just after its opening quote, as RFC 8259 and nlohmann
/// do: no unescaped control characters, only the eight escapes, `\u` with four hex digits, and UTF-16
/// surrogates only as a high-low pair. Stage 1 guarantees a closing quote and valid UTF-8.
/// Stops at the closing quote. simdjson's own unescaping is more lenient about control characters.
bool validStringBody(const uint8_t *p) {
    // Eight bytes at a time while none of them is a quote, a backslash or a control character (SWAR:
    // the classic has-zero-byte and has-less-than tricks). Reading past the string is safe: the input
    // sits in a buffer with SIMDJSON_PADDING bytes after it.
    constexpr uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    for (;;) {
        uint64_t word;
        std::memcpy(&word, p, sizeof(word));
        uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
        uint64_t special = ((word - ones * 0x20) | (quote - ones) | (backslash - ones)) & ~word & highs;
        // `& ~word` drops bytes >= 0x80 (UTF-8), which are never special; for the xor-ed words a
        // matching byte becomes 0 and its high bit is clear in `word` only if it was ASCII, which
        // quote and backslash are.
        if (special == 0) {
            p += 8;
            continue;
        }
        uint8_t c = *p;
        if (c == '"') return true;
        if (c < 0x20) return false;
        if (c != '\\') {
            ++p;
            continue;
        }
        uint8_t e = p[1];
        switch (e) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        case 'u': {
            unsigned unit;
            if (!readHex4(p + 2, unit)) return false;
            p += 6;
            if (unit >= 0xDC00 && unit <= 0xDFFF) return false;
            if (unit >= 0xD800 && unit <= 0xDBFF) {
                unsigned low;
                if (p[0] != '\\' || p[1] != 'u' || !readHex4(p + 2, low)) return false;
                if (low < 0xDC00 || low > 0xDFFF) return false;
                p += 6;
            }
            break;
        }
        default:
            return false;
        }
    }
}

inline bool isJSONWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/// Checks a number token against the JSON grammar (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`),
/// allowing the trailing whitespace that ondemand's raw tokens include. Sets `integral` when the token has
/// neither fraction nor exponent.
bool validNumberToken(std::string_view token, bool &integral) {
    size_t i = 0, n = token.size();
    integral = true;
    if (i < n && token[i] == '-') ++i;
    if (i >= n) return false;
    if (token[i] == '0') {
        ++i;
    } else if (token[i] >= '1' && token[i] <= '9') {
        while (i < n && token[i] >= '0' && token[i] <= '9') ++i;
    } else {
        return false;
    }
    if (i < n && token[i] == '.') {
        integral = false;
        ++i;
        size_t start = i;
        while (i < n && token[i] >= '0' && token[i] <= '9') ++i;
        if (i == start) return false;
    }
    if (i < n && (token[i] == 'e' || token[i] == 'E')) {
        integral = false;
        ++i;
        if (i < n && (token[i] == '+' || token[i] == '-')) ++i;
        size_t start = i;
        while (i < n && token[i] >= '0' && token[i] <= '9') ++i;
        if (i == start) return false;
    }
    while (i < n && isJSONWhitespace(token[i])) ++i;
    return i == n;
}

/// Walks one value fully, validating every token. `level` is the nesting level a container at this
/// position would have. Returns CEJ_OK or an error status.
int32_t walk(simdjson::ondemand::value value, int level) {
    simdjson::ondemand::json_type type;
    if (value.type().get(type) != simdjson::SUCCESS) return CEJ_INVALID_JSON;
    switch (type) {
    case simdjson::ondemand::json_type::object: {
        if (level > CEJ_MAX_DEPTH) return CEJ_TOO_DEEP;
        simdjson::ondemand::object object;
        if (value.get_object().get(object) != simdjson::SUCCESS) return CEJ_INVALID_JSON;
        for (auto entry : object) {
            simdjson::ondemand::field field;
            if (std::move(entry).get(field) != simdjson::SUCCESS) return CEJ_INVALID_JSON;
            if (!validStringBody(reinterpret_cast<const uint8_t *>(field.key().raw()))) return CEJ_INVALID_JSON;
            int32_t status = walk(field.value(), level + 1);
            if (status != CEJ_OK) return status;
        }
        return CEJ_OK;
    }
    case simdjson::ondemand::json_type::array: {
        if (level > CEJ_MAX_DEPTH) return CEJ_TOO_DEEP;
        simdjson::ondemand::array array;
        if (value.get_array().get(array) != simdjson::SUCCESS) return CEJ_INVALID_JSON;
        for (auto element : array) {
            simdjson::ondemand::value child;
            if (element.get(child) != simdjson::SUCCESS) return CEJ_INVALID_JSON;
            int32_t status = walk(child, level + 1);
            if (status != CEJ_OK) return status;
        }
        return CEJ_OK;
    }
    case simdjson::ondemand::json_type::string: {
        simdjson::ondemand::raw_json_string raw;
        if (value.get_raw_json_string().get(raw) != simdjson::SUCCESS) return CEJ_INVALID_JSON;
        return validStringBody(reinterpret_cast<const uint8_t *>(raw.raw())) ? CEJ_OK : CEJ_INVALID_JSON;
    }
    case simdjson::ondemand::json_type::number: {
        bool integral;
        if (!validNumberToken(value.raw_json_token(), integral)) return CEJ_INVALID_JSON;
        // nlohmann refuses a number that overflows a double (1e400); so do we. Integers too large for
        // 64 bits are fine as doubles, as nlohmann stores them.
        double ignored;
        return value.get_double().get(ignored) == simdjson::SUCCESS ? CEJ_OK : CEJ_INVALID_JSON;
    }
    case simdjson::ondemand::json_type::boolean: {
        bool ignored;
        return value.get_bool().get(ignored) == simdjson::SUCCESS ? CEJ_OK : CEJ_INVALID_JSON;
    }
    case simdjson::ondemand::json_type::null: {
        bool isNull = false;
        if (value.is_null().get(isNull) != simdjson::SUCCESS || !isNull) return CEJ_INVALID_JSON;
        return CEJ_OK;
    }
    }
    return CEJ_INVALID_JSON;
}

} // namespace

#endif // CEVENTJSON_JSON_TOKENS_H
