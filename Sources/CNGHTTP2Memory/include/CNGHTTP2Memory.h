#ifndef APNS_RELAY_CNGHTTP2_MEMORY_H
#define APNS_RELAY_CNGHTTP2_MEMORY_H
// A block pool for one nghttp2 session: the memory functions of an `nghttp2_mem`, so that the frames,
// streams and header buffers a session allocates for every request come back from a free list instead of
// malloc (issue #39: nghttp2 made 8 of the relay's ~23 allocations per event).
//
// One pool per session, used only on the thread that drives that session (nghttp2 calls these functions
// inside `nghttp2_session_*` calls; the pool has no lock). Delete the pool after `nghttp2_session_del`.
//
// The functions take the pool as nghttp2's `mem_user_data`; they are declared here without nghttp2's
// header so that this module and CNGHTTP2 do not both define nghttp2's types.
#include <stddef.h>
#include <stdint.h>

typedef struct cnghttp2_pool cnghttp2_pool;

/// What a pool has done, for tests and benchmarks.
typedef struct {
    /// Blocks handed out (malloc, calloc and growing realloc calls).
    uint64_t served;
    /// Of those, how many malloc had to provide (the free list was empty, or the block was large).
    uint64_t from_malloc;
    /// Blocks handed out and not yet returned.
    uint64_t outstanding;
    /// Bytes of free blocks kept for reuse (at most the pool's cap).
    size_t cached_bytes;
} cnghttp2_pool_stats;

/// A pool that keeps at most `max_cached_bytes` of free blocks; NULL when out of memory.
cnghttp2_pool *cnghttp2_pool_new(size_t max_cached_bytes);
/// Frees the pool and the blocks it keeps. Every block it handed out must have been returned.
void cnghttp2_pool_delete(cnghttp2_pool *pool);
void cnghttp2_pool_get_stats(const cnghttp2_pool *pool, cnghttp2_pool_stats *stats);

// The four functions of `nghttp2_mem`, with the pool as their last argument.
void *cnghttp2_pool_malloc(size_t size, void *pool);
void cnghttp2_pool_free(void *block, void *pool);
void *cnghttp2_pool_calloc(size_t count, size_t size, void *pool);
void *cnghttp2_pool_realloc(void *block, size_t size, void *pool);

#endif
