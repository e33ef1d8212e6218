#ifndef APNS_RELAY_CNGHTTP2_SHIM_H
#define APNS_RELAY_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>
#endif
