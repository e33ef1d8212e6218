#ifndef READDIR_GUARD_H
#define READDIR_GUARD_H

/// Entries this thread's readdir calls returned through the guard (for a test that it is in use).
int readdir_guard_served(void);

#endif
