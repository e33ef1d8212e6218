#ifndef APNS_RELAY_CNGHTTP2_SHIM_H
#define APNS_RELAY_CNGHTTP2_SHIM_H
// No _GNU_SOURCE here: it changes glibc's struct definitions (fd_set's field names), and clang refuses to
// merge this module's copy with SwiftGlibc's and COpenSSL's ("fds_bits is not present in definition").
#include <nghttp2/nghttp2.h>
#include <sys/eventfd.h>
#include <pthread.h>

// Helpers for the nghttp2 I/O loop that Glibc's Swift overlay does not expose.
/// A non-blocking, close-on-exec eventfd that wakes an I/O thread.
static inline int cnghttp2_eventfd_nonblocking(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
// Declared by <pthread.h> only under _GNU_SOURCE; glibc has had it since 2.12.
extern int pthread_setname_np(pthread_t thread, const char *name);
/// Names the current thread (≤ 15 characters), for debuggers and `top -H`.
static inline int cnghttp2_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }
#endif
