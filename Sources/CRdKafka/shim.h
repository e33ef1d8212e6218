#ifndef APNS_RELAY_CRDKAFKA_SHIM_H
#define APNS_RELAY_CRDKAFKA_SHIM_H
// librdkafka, plus its mock cluster API. rdkafka_mock.h refuses to be included before rdkafka.h.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

// Function-like and cast macros do not import into Swift; these wrappers give them a name.

/// RD_KAFKA_PARTITION_UA: "let the partitioner choose".
static inline int32_t crdkafka_partition_unassigned(void) { return RD_KAFKA_PARTITION_UA; }

/// RD_KAFKA_OFFSET_INVALID: no offset (e.g. nothing committed yet).
static inline int64_t crdkafka_offset_invalid(void) { return RD_KAFKA_OFFSET_INVALID; }

/// RD_KAFKA_MSG_F_COPY: librdkafka copies key and payload, so Swift buffers may go away after produce.
static inline int crdkafka_msg_flag_copy(void) { return RD_KAFKA_MSG_F_COPY; }

#endif
