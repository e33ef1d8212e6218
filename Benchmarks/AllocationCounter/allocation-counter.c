// Counts what a process does per unit of work, for EndToEndBenchmark's `allocations` mode (LD_PRELOAD; built by
// Benchmarks/end-to-end.sh with gcc into the scratch directory, beside the benchmark):
// - heap allocations: malloc, calloc, realloc, posix_memalign and aligned_alloc;
// - Swift reference counting: swift_retain, swift_retain_n, swift_release and swift_release_n on objects (not
//   on nil), through the runtime's instrumentation hooks (`_swift_retain`, …, and the flag that routes every call
//   through them; InstrumentsSupport.h in the Swift runtime), found with dlsym when libswiftCore is a shared
//   library, or in the executable's own symbol table when the runtime is linked in (`--static-swift-stdlib`);
// - clock reads: clock_gettime calls (ContinuousClock, Date and librdkafka all end there);
// - copies: memcpy and memmove calls, and their bytes.
//
// Each is forwarded to the next definition (glibc's, found with dlsym(RTLD_NEXT)), or to the runtime's original.
// Counts are kept per thread, in a slot of its own (a cache line each: no shared counter bounces between cores;
// only the thread writes it, the dump reads whatever each core has published). On SIGUSR2 the counters are written
// to the file named by BENCH_ALLOC_COUNTS_FILE, via a temporary file renamed over it, so a reader that sees the
// file sees all of it: first one line of totals, `malloc=N calloc=N realloc=N posix_memalign=N aligned_alloc=N
// retain=N release=N clock=N copy=N copy_bytes=N` (retain and release only when the hooks were found), then one
// line per thread that counted anything, `thread <tid> <name> <allocations> <retains> <releases> <clocks> <copies>
// <copied bytes>` (the name from /proc/self/task/<tid>/comm at the dump, `exited` for a thread gone by then): the
// stages of the relay run on threads of their own (the consumer's poll thread, the APNs loops, the producer's poll
// thread, Swift's executor for admission and triage), so the benchmark can say which stage does what.
// With BENCH_REFCOUNT_SITES_FILE set, each dump also writes that file: counts by call site (`refcount`, `copy`,
// `clock`, `alloc` lines) and retains and releases by the object's type (`type` lines); see `sites` below.
// Benchmarks/AllocationCounter/sites.py names the addresses and sums them per event.
//
// Build: gcc -O2 -fno-omit-frame-pointer -shared -fPIC -o libbench-allocation-counter.so allocation-counter.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { COUNT_MALLOC, COUNT_CALLOC, COUNT_REALLOC, COUNT_POSIX_MEMALIGN, COUNT_ALIGNED_ALLOC, COUNT_KINDS };
static const char *const count_names[COUNT_KINDS] = { "malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc" };
static unsigned long counts[COUNT_KINDS];

// Per thread: a slot claimed at a thread's first counted call (initial-exec TLS: reading it never allocates).
// Threads beyond the table share its last slot, named `other` (its counts may then miss a few: not seen, 512 is
// far above the relay's threads).
enum { THREAD_SLOTS = 512 };
struct thread_counts {
    unsigned long allocations, retains, releases, clocks, copies, copied_bytes;
    pid_t tid;
    // The thread's stack, for walking frame pointers safely (call sites only; see `up_frames`).
    uintptr_t stack_low, stack_high;
} __attribute__((aligned(64)));
static struct thread_counts threads[THREAD_SLOTS];
static unsigned int slots_claimed;
static __thread struct thread_counts *thread_slot __attribute__((tls_model("initial-exec")));

// Set when call sites are counted (below).
struct site_counts;
static struct site_counts *sites;

static struct thread_counts *my_slot(void) {
    struct thread_counts *slot = thread_slot;
    if (!slot) {
        unsigned int claimed = __atomic_fetch_add(&slots_claimed, 1, __ATOMIC_ACQ_REL);
        unsigned int index = claimed < THREAD_SLOTS - 1 ? claimed : THREAD_SLOTS - 1;
        slot = &threads[index];
        if (index < THREAD_SLOTS - 1) __atomic_store_n(&slot->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
        thread_slot = slot;
        // Only when sites are counted (the frame walk needs the bounds), and after the slot is set:
        // pthread_getattr_np may allocate, which counts into it.
        pthread_attr_t attributes;
        void *low;
        size_t size;
        if (sites && index < THREAD_SLOTS - 1 && pthread_getattr_np(pthread_self(), &attributes) == 0) {
            if (pthread_attr_getstack(&attributes, &low, &size) == 0) {
                slot->stack_low = (uintptr_t)low;
                slot->stack_high = (uintptr_t)low + size;
            }
            pthread_attr_destroy(&attributes);
        }
    }
    return slot;
}

// One writer per slot: a relaxed load and store, no locked instruction.
#define BUMP(field, by) __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (by), __ATOMIC_RELAXED)

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static int (*real_clock_gettime)(clockid_t, struct timespec *);
static void *(*real_memcpy)(void *, const void *, size_t);
static void *(*real_memmove)(void *, const void *, size_t);

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

// Whether Swift's reference counting is counted (its hooks were found and installed at start).
static int swift_hooks_installed;

// Optional (BENCH_REFCOUNT_SITES_FILE): retains and releases by call site, the return address of the runtime
// entry (swift_retain and swift_release reach the counting functions by tail calls, so that is their caller's
// call site). An open-addressing table claimed with compare-and-swap; sites beyond it are not counted. The dump
// writes `refcount <site> <its function's caller> <theirs> <retains> <releases>`, the first three as hex offsets in
// the main program, for addr2line -f -e <program>; and `copy <site> <caller> <theirs> <calls> <bytes>` for memcpy and memmove
// (its caller is not walked: the libraries that copy keep no frame pointers; a site in a shared library shows as
// an offset outside the program); `clock <site> <caller> <theirs> <reads> 0`; `alloc <site> <caller> <theirs>
// <allocations> 0`; and `type <metadata> <descriptor> <kind> <retains> <releases>` (see `type_sites`).
enum { SITE_SLOTS = 1 << 16 };
struct site_counts {
    uintptr_t site, caller, caller2;
    unsigned long retains, releases;
};
static struct site_counts *sites;
// The same for copies (memcpy, memmove): calls and bytes by call site; and for clock reads.
static struct site_counts *copy_sites;
static struct site_counts *clock_sites;
// And allocations (malloc, calloc, realloc, posix_memalign, aligned_alloc) by call site.
static struct site_counts *alloc_sites;
// And retains and releases by the object's type: keyed by its metadata pointer (the object's first word; `site`
// holds it, the callers are 0), every one counted (the table is never restricted). The dump writes `type
// <metadata> <descriptor> <kind> <retains> <releases>`: the metadata as an offset in the main program (a type
// whose metadata the runtime made, a generic instance, lies outside it, and its offset changes from run to run),
// its first word in hex (its kind: 0 for a Swift class, as ObjC interop is off on Linux; 0x400 and up for boxes,
// closure contexts, errors and tasks), and for a class its nominal type descriptor as an offset in the program,
// which names the type when the metadata has no symbol (else 0). The descriptor is read at the dump only.
static struct site_counts *type_sites;
// Optional (BENCH_REFCOUNT_SITES_TYPE=<metadata offset, in hex, as a `type` line gives it>): only retains and
// releases of objects of that type are counted by call site (the `refcount` lines), to find where one type's
// come from; 0 for all.
static uintptr_t site_type;
static char sites_path[4096];
static uintptr_t main_program_base;

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

static void append_hex(char **cursor, uintptr_t value) {
    char hex[20];
    int n = 0;
    do { hex[n++] = "0123456789abcdef"[value & 15]; value >>= 4; } while (value);
    append(cursor, "0x");
    while (n) *(*cursor)++ = hex[--n];
}

// Ends a dump line with its entry's two counts and writes it; false when the write fails. Async-signal-safe.
static int end_line(int file, char *line, char *cursor, const struct site_counts *entry) {
    append(&cursor, " ");
    append_number(&cursor, __atomic_load_n(&entry->retains, __ATOMIC_RELAXED));
    append(&cursor, " ");
    append_number(&cursor, __atomic_load_n(&entry->releases, __ATOMIC_RELAXED));
    append(&cursor, "\n");
    return write(file, line, (size_t)(cursor - line)) == cursor - line;
}

// One line per site of `table`: `<kind> <site> <its function's caller> <theirs> <count> <count>` (hex offsets in the main
// program; refcount: retains, releases; copy: calls, bytes). Async-signal-safe.
static void dump_sites(int file, const struct site_counts *table, const char *kind) {
    char line[160];
    for (size_t index = 0; index < SITE_SLOTS; index++) {
        uintptr_t site = __atomic_load_n(&table[index].site, __ATOMIC_RELAXED);
        if (!site) continue;
        char *cursor = line;
        append(&cursor, kind);
        // A caller not found (no frame pointer to follow) is written as 0.
        uintptr_t caller = __atomic_load_n(&table[index].caller, __ATOMIC_RELAXED) - 1;
        uintptr_t caller2 = __atomic_load_n(&table[index].caller2, __ATOMIC_RELAXED);
        uintptr_t offsets[3] = {
            site - main_program_base, caller ? caller - main_program_base : 0, caller2 ? caller2 - main_program_base : 0,
        };
        for (int which = 0; which < 3; which++) {
            append(&cursor, " ");
            append_hex(&cursor, offsets[which]);
        }
        if (!end_line(file, line, cursor, &table[index])) return;
    }
}

// The word at `index` of the class metadata without ObjC interop (Linux): kind, superclass, flags and instance
// address point, instance size and alignment mask, class size and address point, then the descriptor.
enum { CLASS_METADATA_DESCRIPTOR = 5 };

// One line per type of `type_sites`: `type <metadata> <descriptor> <kind> <retains> <releases>` (see there).
// Async-signal-safe: metadata is never freed, so reading its words here is safe.
static void dump_types(int file) {
    char line[160];
    for (size_t index = 0; index < SITE_SLOTS; index++) {
        uintptr_t metadata = __atomic_load_n(&type_sites[index].site, __ATOMIC_RELAXED);
        if (!metadata) continue;
        uintptr_t kind = ((const uintptr_t *)metadata)[0];
        uintptr_t descriptor = kind == 0 ? ((const uintptr_t *)metadata)[CLASS_METADATA_DESCRIPTOR] : 0;
        char *cursor = line;
        append(&cursor, "type ");
        append_hex(&cursor, metadata - main_program_base);
        append(&cursor, " ");
        append_hex(&cursor, descriptor ? descriptor - main_program_base : 0);
        append(&cursor, " ");
        append_hex(&cursor, kind);
        if (!end_line(file, line, cursor, &type_sites[index])) return;
    }
}

// Async-signal-safe only: open, write, close, rename, and the counters.
static void dump_counts(int signal_number) {
    (void)signal_number;
    if (!counts_path[0]) return;
    int saved_errno = errno;
    char line[512];
    char *cursor = line;
    for (int kind = 0; kind < COUNT_KINDS; kind++) {
        if (kind) append(&cursor, " ");
        append(&cursor, count_names[kind]);
        append(&cursor, "=");
        append_number(&cursor, __atomic_load_n(&counts[kind], __ATOMIC_RELAXED));
    }
    unsigned int claimed = __atomic_load_n(&slots_claimed, __ATOMIC_ACQUIRE);
    if (claimed > THREAD_SLOTS) claimed = THREAD_SLOTS;
    unsigned long retains = 0, releases = 0, clocks = 0, copies = 0, copied_bytes = 0;
    for (unsigned int slot = 0; slot < claimed; slot++) {
        retains += __atomic_load_n(&threads[slot].retains, __ATOMIC_RELAXED);
        releases += __atomic_load_n(&threads[slot].releases, __ATOMIC_RELAXED);
        clocks += __atomic_load_n(&threads[slot].clocks, __ATOMIC_RELAXED);
        copies += __atomic_load_n(&threads[slot].copies, __ATOMIC_RELAXED);
        copied_bytes += __atomic_load_n(&threads[slot].copied_bytes, __ATOMIC_RELAXED);
    }
    if (swift_hooks_installed) {
        append(&cursor, " retain=");
        append_number(&cursor, retains);
        append(&cursor, " release=");
        append_number(&cursor, releases);
    }
    append(&cursor, " clock=");
    append_number(&cursor, clocks);
    append(&cursor, " copy=");
    append_number(&cursor, copies);
    append(&cursor, " copy_bytes=");
    append_number(&cursor, copied_bytes);
    append(&cursor, "\n");
    int descriptor = open(counts_temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (descriptor < 0) {
        errno = saved_errno;
        return;
    }
    int complete = write(descriptor, line, (size_t)(cursor - line)) == cursor - line;
    for (unsigned int slot = 0; slot < claimed && complete; slot++) {
        const struct thread_counts *counted = &threads[slot];
        pid_t tid = __atomic_load_n(&counted->tid, __ATOMIC_RELAXED);
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
        const unsigned long *fields[] = { &counted->allocations, &counted->retains, &counted->releases, &counted->clocks, &counted->copies, &counted->copied_bytes };
        for (size_t field = 0; field < sizeof fields / sizeof fields[0]; field++) {
            append(&cursor, " ");
            append_number(&cursor, __atomic_load_n(fields[field], __ATOMIC_RELAXED));
        }
        append(&cursor, "\n");
        complete = write(descriptor, line, (size_t)(cursor - line)) == cursor - line;
    }
    close(descriptor);
    if (sites && sites_path[0]) {
        int site_file = open(sites_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (site_file >= 0) {
            dump_sites(site_file, sites, "refcount");
            if (type_sites) dump_types(site_file);
            if (copy_sites) dump_sites(site_file, copy_sites, "copy");
            if (clock_sites) dump_sites(site_file, clock_sites, "clock");
            if (alloc_sites) dump_sites(site_file, alloc_sites, "alloc");
            close(site_file);
        }
    }
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
    real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
    real_memcpy = dlsym(RTLD_NEXT, "memcpy");
    real_memmove = dlsym(RTLD_NEXT, "memmove");
    resolving = 0;
}

// MARK: Swift's reference counting


static void count_site_in(struct site_counts *sites, uintptr_t site, uintptr_t caller, uintptr_t caller2, unsigned long first, unsigned long second) {
    uintptr_t key = site ^ (caller * 31) ^ (caller2 * 1009);
    size_t index = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 48) & (SITE_SLOTS - 1);
    for (size_t probe = 0; probe < 64; probe++, index = (index + 1) & (SITE_SLOTS - 1)) {
        uintptr_t seen = __atomic_load_n(&sites[index].site, __ATOMIC_ACQUIRE);
        if (seen == 0) {
            // Claimed with the pair: the caller is written first, then the site publishes both.
            uintptr_t expected = 0;
            if (__atomic_compare_exchange_n(&sites[index].caller, &expected, caller + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                __atomic_store_n(&sites[index].caller2, caller2, __ATOMIC_RELAXED);
                __atomic_store_n(&sites[index].site, site, __ATOMIC_RELEASE);
                seen = site;
            } else {
                while ((seen = __atomic_load_n(&sites[index].site, __ATOMIC_ACQUIRE)) == 0) {}
            }
        }
        if (seen == site && __atomic_load_n(&sites[index].caller, __ATOMIC_RELAXED) == caller + 1
            && __atomic_load_n(&sites[index].caller2, __ATOMIC_RELAXED) == caller2) {
            if (first) __atomic_fetch_add(&sites[index].retains, first, __ATOMIC_RELAXED);
            if (second) __atomic_fetch_add(&sites[index].releases, second, __ATOMIC_RELAXED);
            return;
        }
    }
}

// The return addresses one and two frames up from the hook's caller, through the frame-pointer chain: the hooks
// are reached by tail calls, so the first is the caller of the function that retained or released (often an
// outlined copy, whose caller is the second). Swift code keeps frame pointers; where a function does not, the
// saved value is not a frame of this stack and 0 is returned (never read).
__attribute__((noinline)) static uintptr_t up_frames(uintptr_t *frame, uintptr_t *second) {
    struct thread_counts *slot = my_slot();
    *second = 0;
    uintptr_t saved = frame[0];  // the hook's caller's frame pointer, saved by the hook's prologue
    if (saved < (uintptr_t)frame || saved + 16 > slot->stack_high || saved < slot->stack_low || (saved & 7)) return 0;
    uintptr_t next = ((uintptr_t *)saved)[0];
    if (next > saved && next + 16 <= slot->stack_high && !(next & 7)) *second = ((uintptr_t *)next)[1];
    return ((uintptr_t *)saved)[1];
}

// The object's type, then (for every type, or the one of BENCH_REFCOUNT_SITES_TYPE) the call site, and (see
// `up_frames`) its function's callers. The metadata is the object's first word, its pointer masked as in
// `writes_count`. Built with -fno-omit-frame-pointer.
#define COUNT_SITE(object, release) do { \
    if (sites) { \
        uintptr_t metadata = *(const uintptr_t *)((uintptr_t)(object) & 0x00fffffffffffff8ull); \
        count_site_in(type_sites, metadata, 0, 0, !(release), (release)); \
        if (!site_type || metadata == site_type) { \
            uintptr_t second; \
            uintptr_t first = up_frames((uintptr_t *)__builtin_frame_address(0), &second); \
            count_site_in(sites, (uintptr_t)__builtin_return_address(0), first, second, !(release), (release)); \
        } \
    } \
} while (0)

static void *(*original_retain)(void *);
static void *(*original_retain_n)(void *, uint32_t);
static void (*original_release)(void *);
static void (*original_release_n)(void *, uint32_t);

// Whether a retain or release of `object` writes its reference count: not for nil and tagged values (the runtime
// skips them), nor for immortal objects (the empty array, dictionary and set singletons, static objects), whose
// count has the slow-path bit and an all-ones strong count: the runtime reads it and returns (swift_retain's
// slow path in the disassembly; RefCount.h).
static int writes_count(void *object) {
    if ((intptr_t)object <= 0) return 0;
    const uint64_t *header = (const uint64_t *)((uintptr_t)object & 0x00fffffffffffff8ull);
    uint64_t bits = __atomic_load_n(&header[1], __ATOMIC_RELAXED);
    return !((int64_t)bits < 0 && (uint32_t)bits == 0xffffffffu);
}

// Each gets the object as the caller passed it (the runtime's own functions skip nil and tagged values).
static void *counting_retain(void *object) {
    if (writes_count(object)) {
        BUMP(my_slot()->retains, 1);
        COUNT_SITE(object, 0);
    }
    return original_retain(object);
}

static void *counting_retain_n(void *object, uint32_t n) {
    if (writes_count(object)) {
        BUMP(my_slot()->retains, 1);
        COUNT_SITE(object, 0);
    }
    return original_retain_n(object, n);
}

static void counting_release(void *object) {
    if (writes_count(object)) {
        BUMP(my_slot()->releases, 1);
        COUNT_SITE(object, 1);
    }
    original_release(object);
}

static void counting_release_n(void *object, uint32_t n) {
    if (writes_count(object)) {
        BUMP(my_slot()->releases, 1);
        COUNT_SITE(object, 1);
    }
    original_release_n(object, n);
}

// The load address of the object whose file is `path` (the main program for "").
struct object_search {
    const char *path;
    uintptr_t base;
    int found;
};

static int note_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct object_search *search = data;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (strcmp(name, search->path) == 0) {
        search->base = info->dlpi_addr;
        search->found = 1;
        return 1;
    }
    return 0;
}

// The addresses of `names` in the symbol table (.symtab: local symbols too) of the object loaded from `path`
// ("" for the main program), 0 where absent.
static void find_symbols(const char *path, const char *const *names, uintptr_t *addresses, int count) {
    struct object_search search = { path, 0, 0 };
    dl_iterate_phdr(note_object, &search);
    if (!search.found) return;
    int descriptor = open(path[0] ? path : "/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return;
    struct stat status;
    if (fstat(descriptor, &status) != 0 || (size_t)status.st_size < sizeof(Elf64_Ehdr)) {
        close(descriptor);
        return;
    }
    size_t size = (size_t)status.st_size;
    const unsigned char *file = mmap(NULL, size, PROT_READ, MAP_PRIVATE, descriptor, 0);
    close(descriptor);
    if (file == MAP_FAILED) return;
    const Elf64_Ehdr *header = (const Elf64_Ehdr *)file;
    if (memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 || header->e_ident[EI_CLASS] != ELFCLASS64
        || header->e_shoff + (size_t)header->e_shnum * sizeof(Elf64_Shdr) > size) {
        munmap((void *)file, size);
        return;
    }
    const Elf64_Shdr *sections = (const Elf64_Shdr *)(file + header->e_shoff);
    for (int index = 0; index < header->e_shnum; index++) {
        if (sections[index].sh_type != SHT_SYMTAB || sections[index].sh_link >= header->e_shnum) continue;
        const Elf64_Shdr *strings = &sections[sections[index].sh_link];
        if (sections[index].sh_offset + sections[index].sh_size > size || strings->sh_offset + strings->sh_size > size) continue;
        const Elf64_Sym *symbols = (const Elf64_Sym *)(file + sections[index].sh_offset);
        size_t symbol_count = sections[index].sh_size / sizeof(Elf64_Sym);
        const char *names_table = (const char *)(file + strings->sh_offset);
        for (size_t symbol = 0; symbol < symbol_count; symbol++) {
            if (symbols[symbol].st_name >= strings->sh_size || symbols[symbol].st_value == 0) continue;
            const char *name = names_table + symbols[symbol].st_name;
            for (int wanted = 0; wanted < count; wanted++) {
                if (!addresses[wanted] && strcmp(name, names[wanted]) == 0) addresses[wanted] = search.base + symbols[symbol].st_value;
            }
        }
    }
    munmap((void *)file, size);
}

// Routes the runtime's retains and releases through the counting functions. The runtime calls its hooks only
// while a flag is set (InstrumentsSupport.h): swift_retain_n, swift_release and swift_release_n then call
// `_swift_retain_n`, `_swift_release`, `_swift_release_n` with the object as given; swift_retain calls
// `_swift_retain_adapter`, which masks the pointer's spare bits before it calls `_swift_retain` (and so passes a
// tagged value on as an address), so its counting function replaces the adapter and calls the original
// `_swift_retain` itself. These are the runtime's private symbols, read from its symbol table: in the program
// with `--static-swift-stdlib`, else in libswiftCore. If one is missing, nothing is installed and the dump has
// no retain and release counts. Before main: no Swift code has run yet.
static void install_swift_hooks(void) {
    static const char *const names[] = {
        "_swift_retain", "_swift_retain_n", "_swift_release", "_swift_release_n",
        "_swift_enableSwizzlingOfAllocationAndRefCountingFunctions_forInstrumentsOnly", "_ZL21_swift_retain_adapter",
    };
    enum { NAMES = sizeof names / sizeof names[0] };
    uintptr_t addresses[NAMES] = { 0 };
    const char *path = "";
    Dl_info where;
    void *exported = dlsym(RTLD_DEFAULT, "_swift_retain");
    if (exported && dladdr(exported, &where) && where.dli_fname) {
        // libswiftCore as a shared library (the main program's own symbols are not exported).
        struct object_search search = { where.dli_fname, 0, 0 };
        dl_iterate_phdr(note_object, &search);
        if (search.found) path = where.dli_fname;
    }
    struct object_search program = { "", 0, 0 };
    dl_iterate_phdr(note_object, &program);
    main_program_base = program.base;
    find_symbols(path, names, addresses, NAMES);
    for (int index = 0; index < NAMES; index++) if (!addresses[index]) return;
    void **retain = (void **)addresses[0], **retain_n = (void **)addresses[1];
    void **release = (void **)addresses[2], **release_n = (void **)addresses[3];
    void **retain_adapter = (void **)addresses[5];
    original_retain = (void *(*)(void *))*retain;
    original_retain_n = (void *(*)(void *, uint32_t))*retain_n;
    original_release = (void (*)(void *))*release;
    original_release_n = (void (*)(void *, uint32_t))*release_n;
    if (!original_retain || !original_retain_n || !original_release || !original_release_n || !*retain_adapter) return;
    *retain_adapter = (void *)counting_retain;
    *retain_n = (void *)counting_retain_n;
    *release = (void *)counting_release;
    *release_n = (void *)counting_release_n;
    const char *sites_file = getenv("BENCH_REFCOUNT_SITES_FILE");
    if (sites_file && strlen(sites_file) < sizeof sites_path) {
        void *table = mmap(NULL, SITE_SLOTS * sizeof(struct site_counts), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        void *copy_table = mmap(NULL, SITE_SLOTS * sizeof(struct site_counts), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        void *clock_table = mmap(NULL, SITE_SLOTS * sizeof(struct site_counts), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        void *alloc_table = mmap(NULL, SITE_SLOTS * sizeof(struct site_counts), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        void *type_table = mmap(NULL, SITE_SLOTS * sizeof(struct site_counts), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (table != MAP_FAILED && copy_table != MAP_FAILED && clock_table != MAP_FAILED && alloc_table != MAP_FAILED
            && type_table != MAP_FAILED) {
            strcpy(sites_path, sites_file);
            copy_sites = copy_table;
            clock_sites = clock_table;
            alloc_sites = alloc_table;
            type_sites = type_table;
            // An offset that does not parse restricts nothing, and says so (before main: stderr is the relay's).
            const char *type = getenv("BENCH_REFCOUNT_SITES_TYPE");
            if (type && *type) {
                char *end;
                errno = 0;
                unsigned long long offset = strtoull(type, &end, 16);
                if (errno == 0 && *end == 0 && offset) site_type = main_program_base + (uintptr_t)offset;
                else fprintf(stderr, "allocation-counter: BENCH_REFCOUNT_SITES_TYPE=%s is not a hex offset; ignored\n", type);
            }
            sites = table;
        }
    }
    __atomic_store_n((unsigned char *)addresses[4], 1, __ATOMIC_RELEASE);
    swift_hooks_installed = 1;
}

// Before main (and before any thread): find the real functions, then listen for SIGUSR2.
__attribute__((constructor)) static void start(void) {
    resolve();
    install_swift_hooks();
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

// The return addresses `skip` + 1 and `skip` + 2 frames up from the caller of the function whose frame is
// `frame` (as `up_frames` for `skip` 0), each 0 where the chain leaves the thread's stack.
__attribute__((noinline)) static uintptr_t up_frames_skipping(uintptr_t *frame, int skip, uintptr_t *second) {
    struct thread_counts *slot = my_slot();
    *second = 0;
    uintptr_t current = frame[0];
    for (int level = 0; level <= skip + 1; level++) {
        if (current < (uintptr_t)frame || current + 16 > slot->stack_high || current < slot->stack_low || (current & 7)) return 0;
        if (level == skip) {
            uintptr_t next = ((uintptr_t *)current)[0];
            if (next > current && next + 16 <= slot->stack_high && !(next & 7)) *second = ((uintptr_t *)next)[1];
            return ((uintptr_t *)current)[1];
        }
        current = ((uintptr_t *)current)[0];
    }
    return 0;
}

// Counts an allocation, by thread, and by call site when sites are counted: the allocating function's return
// address (in swift_slowAlloc, for Swift), then the return addresses three and four frames up, past
// swift_allocObject and the function that called it (an object's allocating initializer, or an array buffer's
// initializer), so that the two callers are the code that made the object, or the array operation and its caller.
#define count(kind) do { \
    __atomic_fetch_add(&counts[kind], 1, __ATOMIC_RELAXED); \
    BUMP(my_slot()->allocations, 1); \
    if (alloc_sites) { \
        uintptr_t second; \
        uintptr_t first = up_frames_skipping((uintptr_t *)__builtin_frame_address(0), 2, &second); \
        count_site_in(alloc_sites, (uintptr_t)__builtin_return_address(0), first, second, 1, 0); \
    } \
} while (0)

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

// MARK: Clock reads and copies

int clock_gettime(clockid_t clock, struct timespec *time) {
    resolve();
    if (!real_clock_gettime) return (int)syscall(SYS_clock_gettime, clock, time);
    BUMP(my_slot()->clocks, 1);
    if (clock_sites) {
        // Swift reads the clock through its runtime (swift_get_time), which keeps a frame pointer: its callers.
        uintptr_t second;
        uintptr_t first = up_frames((uintptr_t *)__builtin_frame_address(0), &second);
        count_site_in(clock_sites, (uintptr_t)__builtin_return_address(0), first, second, 1, 0);
    }
    return real_clock_gettime(clock, time);
}

// For the calls made while dlsym runs, before the real functions are known; kept a plain loop (not turned into a
// call to memcpy, which would be this file's own).
__attribute__((optimize("no-tree-loop-distribute-patterns")))
static void *copy_bytes(void *destination, const void *source, size_t size) {
    unsigned char *to = destination;
    const unsigned char *from = source;
    if (to < from) {
        for (size_t index = 0; index < size; index++) to[index] = from[index];
    } else {
        for (size_t index = size; index > 0; index--) to[index - 1] = from[index - 1];
    }
    return destination;
}

// A copy of `size` bytes from `site` (the caller's call instruction).
static void count_copy(size_t size, uintptr_t site) {
    struct thread_counts *slot = my_slot();
    BUMP(slot->copies, 1);
    BUMP(slot->copied_bytes, size);
    if (copy_sites) count_site_in(copy_sites, site, 0, 0, 1, size);
}

void *memcpy(void *destination, const void *source, size_t size) {
    resolve();
    if (!real_memcpy) return copy_bytes(destination, source, size);
    count_copy(size, (uintptr_t)__builtin_return_address(0));
    return real_memcpy(destination, source, size);
}

void *memmove(void *destination, const void *source, size_t size) {
    resolve();
    if (!real_memmove) return copy_bytes(destination, source, size);
    count_copy(size, (uintptr_t)__builtin_return_address(0));
    return real_memmove(destination, source, size);
}
