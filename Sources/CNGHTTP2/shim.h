#ifndef APNS_RELAY_CNGHTTP2_SHIM_H
#define APNS_RELAY_CNGHTTP2_SHIM_H
// No _GNU_SOURCE here: it changes glibc's struct definitions (fd_set's field names), and clang refuses to
// merge this module's copy with SwiftGlibc's and COpenSSL's ("fds_bits is not present in definition").
#include <nghttp2/nghttp2.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

// Helpers for the nghttp2 I/O loop that Glibc's Swift overlay does not expose.
/// A non-blocking, close-on-exec eventfd that wakes an event loop.
static inline int cnghttp2_eventfd_nonblocking(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
// Declared by <pthread.h> only under _GNU_SOURCE; glibc has had it since 2.12.
extern int pthread_setname_np(pthread_t thread, const char *name);
/// Names the current thread (≤ 15 characters), for debuggers and `top -H`.
static inline int cnghttp2_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }

// The APNs event loop's epoll set and timer (see APNsEventLoop.swift). `struct epoll_event` is packed on
// x86-64, so tokens and event masks cross into Swift as plain arrays instead.
static inline int cnghttp2_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
/// Adds (`op` EPOLL_CTL_ADD), changes (EPOLL_CTL_MOD) or removes (EPOLL_CTL_DEL) `fd`, identified by `token`.
static inline int cnghttp2_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = token;
    return epoll_ctl(epfd, op, fd, &event);
}
/// Waits up to `timeout_ms` (-1: no limit) for at most `max` (≤ 256) ready descriptors.
static inline int cnghttp2_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event ready[256];
    if (max > 256) max = 256;
    int n = epoll_wait(epfd, ready, max, timeout_ms);
    for (int i = 0; i < n; i++) { tokens[i] = ready[i].data.u64; events[i] = ready[i].events; }
    return n;
}
static inline uint32_t cnghttp2_epollin(void) { return EPOLLIN; }
static inline uint32_t cnghttp2_epollout(void) { return EPOLLOUT; }
static inline uint32_t cnghttp2_epollerr_hup(void) { return EPOLLERR | EPOLLHUP | EPOLLRDHUP; }
static inline int cnghttp2_timerfd_create(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }
/// Arms the timer to fire once after `nanoseconds` (at least 1), or disarms it when `nanoseconds` < 0.
static inline int cnghttp2_timerfd_arm(int fd, int64_t nanoseconds) {
    struct itimerspec spec = {{0, 0}, {0, 0}};
    if (nanoseconds >= 0) {
        if (nanoseconds == 0) nanoseconds = 1;  /* all zero would disarm */
        spec.it_value.tv_sec = nanoseconds / 1000000000;
        spec.it_value.tv_nsec = nanoseconds % 1000000000;
    }
    return timerfd_settime(fd, 0, &spec, NULL);
}
#endif
