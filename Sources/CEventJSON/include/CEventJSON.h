#ifndef APNS_RELAY_CEVENTJSON_H
#define APNS_RELAY_CEVENTJSON_H
#ifdef __cplusplus
extern "C" {
#endif
/// Returns the simdjson implementation chosen for this CPU (e.g. "haswell"); never NULL.
const char *cej_simdjson_implementation(void);
#ifdef __cplusplus
}
#endif
#endif
