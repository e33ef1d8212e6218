// The test process's readdir(3): glibc's, returning a copy of the entry padded to a whole `struct dirent`.
//
// swift-corelibs-foundation's Process.run() on Linux (Swift 6.3.1) lists /proc/self/fd and copies each
// entry's whole 256-byte d_name (`dirEntPtr.pointee.d_name`), but glibc returns entries sized to d_reclen in
// its 32 KiB readdir buffer. With more than about 1300 descriptors open (the parallel suite reaches 2500) a
// batch fills that buffer, its last entry sits at the buffer's end, and the copy reads up to ~230 bytes
// past it: when the buffer ends the heap's mapping, the test process dies ("Bad pointer dereference",
// __memcpy_avx512_unaligned_erms in Process.run). Fixed upstream (swift-corelibs-foundation#5472); until the
// toolchain has the fix, every readdir in the test process goes through here. Defined in the test
// executable, this definition takes precedence over libc's for libFoundation's calls too.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include "readdir_guard.h"

static __thread struct dirent padded;
static __thread int served;

struct dirent *readdir(DIR *directory) {
    static struct dirent *(*libc_readdir)(DIR *);
    if (libc_readdir == NULL) {
        libc_readdir = (struct dirent *(*)(DIR *))dlsym(RTLD_NEXT, "readdir");
    }
    struct dirent *entry = libc_readdir(directory);
    if (entry == NULL) return NULL;
    size_t length = entry->d_reclen < sizeof(padded) ? entry->d_reclen : sizeof(padded);
    memcpy(&padded, entry, length);
    memset((char *)&padded + length, 0, sizeof(padded) - length);
    served += 1;
    return &padded;
}

int readdir_guard_served(void) { return served; }
