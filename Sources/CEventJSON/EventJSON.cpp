#include "CEventJSON.h"
#include <simdjson.h>

extern "C" const char *cej_simdjson_implementation(void) {
    return simdjson::get_active_implementation()->name().data();
}
