// Counts a process's heap allocations, for EndToEndBenchmark's `allocations` mode (LD_PRELOAD; built by
// Benchmarks/end-to-end.sh with gcc into the scratch directory, beside the benchmark).
//
// malloc, calloc, realloc, posix_memalign and aligned_alloc are counted with relaxed atomics (a count, not an
// ordering: the dump reads whatever each core has published) and forwarded to the next definition
// (glibc's), found with dlsym(RTLD_NEXT). On SIGUSR2 the counters are written to the file named by
// BENCH_ALLOC_COUNTS_FILE as one line, `malloc=N calloc=N realloc=N posix_memalign=N aligned_alloc=N`, via a
// temporary file renamed over it, so a reader that sees the file sees the whole line. Then one line per thread
// that allocated, `thread <tid> <name> N` (its allocations of every kind; the name from
// /proc/self/task/<tid>/comm at the dump, `exited` for a thread gone by then): the stages of the relay run on
// threads of their own (the consumer's poll thread, the APNs loops, the producer's poll thread, Swift's
// executor for admission and triage), so the benchmark can say which stage allocates what.
//
// Build: gcc -O2 -shared -fPIC -o libbench-allocation-counter.so allocation-counter.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { COUNT_MALLOC, COUNT_CALLOC, COUNT_REALLOC, COUNT_POSIX_MEMALIGN, COUNT_ALIGNED_ALLOC, COUNT_KINDS };
static const char *const count_names[COUNT_KINDS] = { "malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc" };
static unsigned long counts[COUNT_KINDS];

// Per thread: a slot claimed at a thread's first counted allocation (initial-exec TLS: reading it never
// allocates). Threads beyond the table share its last slot, named `other`.
enum { THREAD_SLOTS = 512 };
static unsigned long thread_counts[THREAD_SLOTS];
static pid_t thread_ids[THREAD_SLOTS];
static unsigned int slots_claimed;
static __thread int thread_slot __attribute__((tls_model("initial-exec"))) = -1;

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

// dlsym allocates (glibc's dlerror state is calloc'd), so while it runs our calloc would call a function
// not yet found: allocations made meanwhile come from this buffer, and free ignores them.
static _Alignas(64) char bootstrap_buffer[8192];
static size_t bootstrap_used;
static int resolving;

static void *bootstrap_alloc(size_t size) {
    size_t start = (bootstrap_used + 15) & ~(size_t)15;
    if (start + size > sizeof bootstrap_buffer) return NULL;
    bootstrap_used = start + size;
    return bootstrap_buffer + start;  // static storage is zeroed: good for calloc too
}

static int is_bootstrap(const void *pointer) {
    return (const char *)pointer >= bootstrap_buffer && (const char *)pointer < bootstrap_buffer + sizeof bootstrap_buffer;
}

// The counts file and its temporary, kept from start-up: the signal handler may not call getenv or malloc.
static char counts_path[4096];
static char counts_temporary[4096 + 8];

static void append(char **cursor, const char *text) {
    while (*text) *(*cursor)++ = *text++;
}

static void append_number(char **cursor, unsigned long value) {
    char digits[24];
    int n = 0;
    do { digits[n++] = (char)('0' + value % 10); value /= 10; } while (value);
    while (n) *(*cursor)++ = digits[--n];
}

// Async-signal-safe only: open, write, close, rename, and the counters.
static void dump_counts(int signal_number) {
    (void)signal_number;
    if (!counts_path[0]) return;
    int saved_errno = errno;
    char line[256];
    char *cursor = line;
    for (int kind = 0; kind < COUNT_KINDS; kind++) {
        if (kind) append(&cursor, " ");
        append(&cursor, count_names[kind]);
        append(&cursor, "=");
        append_number(&cursor, __atomic_load_n(&counts[kind], __ATOMIC_RELAXED));
    }
    append(&cursor, "\n");
    int descriptor = open(counts_temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (descriptor < 0) {
        errno = saved_errno;
        return;
    }
    int complete = write(descriptor, line, (size_t)(cursor - line)) == cursor - line;
    unsigned int claimed = __atomic_load_n(&slots_claimed, __ATOMIC_ACQUIRE);
    if (claimed > THREAD_SLOTS) claimed = THREAD_SLOTS;
    for (unsigned int slot = 0; slot < claimed && complete; slot++) {
        pid_t tid = __atomic_load_n(&thread_ids[slot], __ATOMIC_RELAXED);
        char name[64] = "other";
        if (tid > 0) {
            char path[64];
            char *p = path;
            append(&p, "/proc/self/task/");
            append_number(&p, (unsigned long)tid);
            append(&p, "/comm");
            *p = 0;
            int comm = open(path, O_RDONLY | O_CLOEXEC);
            ssize_t length = comm >= 0 ? read(comm, name, sizeof name - 1) : -1;
            if (comm >= 0) close(comm);
            if (length > 0) {
                name[length] = 0;
                for (ssize_t i = 0; i < length; i++) if (name[i] == '\n' || name[i] == ' ') name[i] = name[i] == ' ' ? '_' : 0;
            } else {
                strcpy(name, "exited");
            }
        }
        cursor = line;
        append(&cursor, "thread ");
        append_number(&cursor, (unsigned long)(tid > 0 ? tid : 0));
        append(&cursor, " ");
        append(&cursor, name);
        append(&cursor, " ");
        append_number(&cursor, __atomic_load_n(&thread_counts[slot], __ATOMIC_RELAXED));
        append(&cursor, "\n");
        complete = write(descriptor, line, (size_t)(cursor - line)) == cursor - line;
    }
    close(descriptor);
    if (complete) rename(counts_temporary, counts_path);
    errno = saved_errno;
}

static void resolve(void) {
    if (real_malloc || resolving) return;
    resolving = 1;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    resolving = 0;
}

// Before main (and before any thread): find the real functions, then listen for SIGUSR2.
__attribute__((constructor)) static void start(void) {
    resolve();
    const char *path = getenv("BENCH_ALLOC_COUNTS_FILE");
    if (!path || strlen(path) >= sizeof counts_path) return;
    strcpy(counts_path, path);
    strcpy(counts_temporary, path);
    strcat(counts_temporary, ".tmp");
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = dump_counts;
    action.sa_flags = SA_RESTART;  // the relay's blocking calls go on after a dump
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR2, &action, NULL);
}

static void count(int kind) {
    __atomic_fetch_add(&counts[kind], 1, __ATOMIC_RELAXED);
    int slot = thread_slot;
    if (slot < 0) {
        unsigned int claimed = __atomic_fetch_add(&slots_claimed, 1, __ATOMIC_ACQ_REL);
        slot = claimed < THREAD_SLOTS - 1 ? (int)claimed : THREAD_SLOTS - 1;
        if (slot < THREAD_SLOTS - 1) __atomic_store_n(&thread_ids[slot], (pid_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
        thread_slot = slot;
    }
    __atomic_fetch_add(&thread_counts[slot], 1, __ATOMIC_RELAXED);
}

void *malloc(size_t size) {
    resolve();
    if (!real_malloc) return bootstrap_alloc(size);
    count(COUNT_MALLOC);
    return real_malloc(size);
}

void *calloc(size_t count_of, size_t size) {
    resolve();
    if (!real_calloc) {
        if (size && count_of > SIZE_MAX / size) return NULL;
        return bootstrap_alloc(count_of * size);
    }
    count(COUNT_CALLOC);
    return real_calloc(count_of, size);
}

void *realloc(void *pointer, size_t size) {
    resolve();
    if (is_bootstrap(pointer)) {
        // Never seen in practice (dlsym's buffers are not resized), handled for completeness: move it out.
        size_t available = sizeof bootstrap_buffer - (size_t)((char *)pointer - bootstrap_buffer);
        void *moved = malloc(size);
        if (moved) memcpy(moved, pointer, size < available ? size : available);
        return moved;
    }
    if (!real_realloc) return NULL;
    count(COUNT_REALLOC);
    return real_realloc(pointer, size);
}

void free(void *pointer) {
    if (!pointer || is_bootstrap(pointer)) return;
    resolve();
    if (real_free) real_free(pointer);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    resolve();
    if (!real_posix_memalign) return ENOMEM;
    count(COUNT_POSIX_MEMALIGN);
    return real_posix_memalign(result, alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    resolve();
    if (!real_aligned_alloc) return NULL;
    count(COUNT_ALIGNED_ALLOC);
    return real_aligned_alloc(alignment, size);
}
