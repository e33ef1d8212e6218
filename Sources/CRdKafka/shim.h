#ifndef APNS_RELAY_CRDKAFKA_SHIM_H
#define APNS_RELAY_CRDKAFKA_SHIM_H
// librdkafka, plus its mock cluster API. rdkafka_mock.h refuses to be included before rdkafka.h.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#endif
