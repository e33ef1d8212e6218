#ifndef APNS_RELAY_CNGHTTP2_SHIM_H
#define APNS_RELAY_CNGHTTP2_SHIM_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <nghttp2/nghttp2.h>
#include <sys/eventfd.h>
#include <pthread.h>

// Helpers for the nghttp2 I/O loop that Glibc's Swift overlay does not expose.
/// A non-blocking, close-on-exec eventfd that wakes an I/O thread.
static inline int cnghttp2_eventfd_nonblocking(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
/// Names the current thread (≤ 15 characters), for debuggers and `top -H`.
static inline int cnghttp2_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }
#endif
