#include "CNGHTTP2Memory.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

// Blocks of up to 4 KiB come in eight power-of-two classes; larger ones go straight to malloc. Every block
// is preceded by a 16-byte header (which keeps malloc's 16-byte alignment) saying its class, or its size for
// a large block, so that free and realloc need no lookup.
enum { CLASS_COUNT = 8, SMALLEST_SHIFT = 5, LARGE = CLASS_COUNT };

typedef struct {
    alignas(16) uint32_t class_index;
    size_t large_size;
} block_header;
_Static_assert(sizeof(block_header) == 16, "the header keeps blocks 16-byte aligned");

typedef struct free_block { struct free_block *next; } free_block;

struct cnghttp2_pool {
    free_block *free_lists[CLASS_COUNT];
    size_t cached_bytes;
    size_t max_cached_bytes;
    uint64_t served;
    uint64_t from_malloc;
    uint64_t outstanding;
};

static inline size_t class_size(uint32_t class_index) { return (size_t)1 << (class_index + SMALLEST_SHIFT); }

/// The smallest class that holds `size`, or LARGE: the bit length of `size - 1`, less the smallest class's.
static inline uint32_t class_for(size_t size) {
    if (size <= class_size(0)) return 0;
    if (size > class_size(CLASS_COUNT - 1)) return LARGE;
    return (uint32_t)(64 - __builtin_clzll((unsigned long long)(size - 1))) - SMALLEST_SHIFT;
}

static inline block_header *header_of(void *block) { return (block_header *)block - 1; }

cnghttp2_pool *cnghttp2_pool_new(size_t max_cached_bytes) {
    cnghttp2_pool *pool = calloc(1, sizeof *pool);
    if (pool) pool->max_cached_bytes = max_cached_bytes;
    return pool;
}

void cnghttp2_pool_delete(cnghttp2_pool *pool) {
    if (!pool) return;
    for (int index = 0; index < CLASS_COUNT; index++) {
        free_block *block = pool->free_lists[index];
        while (block) {
            free_block *next = block->next;
            free(header_of(block));
            block = next;
        }
    }
    free(pool);
}

void cnghttp2_pool_get_stats(const cnghttp2_pool *pool, cnghttp2_pool_stats *stats) {
    stats->served = pool->served;
    stats->from_malloc = pool->from_malloc;
    stats->outstanding = pool->outstanding;
    stats->cached_bytes = pool->cached_bytes;
}

void *cnghttp2_pool_malloc(size_t size, void *opaque) {
    cnghttp2_pool *pool = opaque;
    uint32_t index = class_for(size);
    if (index != LARGE && pool->free_lists[index]) {
        free_block *block = pool->free_lists[index];
        pool->free_lists[index] = block->next;
        pool->cached_bytes -= class_size(index);
        pool->served++;
        pool->outstanding++;
        return block;
    }
    size_t body = index == LARGE ? size : class_size(index);
    if (body > SIZE_MAX - sizeof(block_header)) return NULL;
    block_header *header = malloc(sizeof(block_header) + body);
    if (!header) return NULL;
    header->class_index = index;
    header->large_size = index == LARGE ? size : 0;
    pool->served++;
    pool->from_malloc++;
    pool->outstanding++;
    return header + 1;
}

void cnghttp2_pool_free(void *block, void *opaque) {
    if (!block) return;
    cnghttp2_pool *pool = opaque;
    block_header *header = header_of(block);
    pool->outstanding--;
    uint32_t index = header->class_index;
    if (index == LARGE || pool->cached_bytes + class_size(index) > pool->max_cached_bytes) {
        free(header);
        return;
    }
    free_block *entry = block;
    entry->next = pool->free_lists[index];
    pool->free_lists[index] = entry;
    pool->cached_bytes += class_size(index);
}

void *cnghttp2_pool_calloc(size_t count, size_t size, void *opaque) {
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    void *block = cnghttp2_pool_malloc(count * size, opaque);
    if (block) memset(block, 0, count * size);
    return block;
}

void *cnghttp2_pool_realloc(void *block, size_t size, void *opaque) {
    if (!block) return cnghttp2_pool_malloc(size, opaque);
    if (size == 0) {
        cnghttp2_pool_free(block, opaque);
        return NULL;
    }
    block_header *header = header_of(block);
    size_t capacity = header->class_index == LARGE ? header->large_size : class_size(header->class_index);
    if (size <= capacity) return block;
    void *grown = cnghttp2_pool_malloc(size, opaque);
    if (!grown) return NULL;  // as realloc: the old block stays valid
    memcpy(grown, block, capacity);
    cnghttp2_pool_free(block, opaque);
    return grown;
}
