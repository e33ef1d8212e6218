// glibc's allocator statistics (mallinfo2), which Swift's Glibc module does not import.
#pragma once
#include <malloc.h>
