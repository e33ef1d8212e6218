// cej_salvage_event: the producer's `id` and `metadata` from an event that was refused, for its result
// (see CEventJSON.h). Independent of the fast decoder and of the schema validator.
#include "CEventJSON.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

using nlohmann::json;

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
