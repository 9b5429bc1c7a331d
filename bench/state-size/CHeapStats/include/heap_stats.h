#ifndef MAIDIAN_HEAP_STATS_H
#define MAIDIAN_HEAP_STATS_H
#include <stddef.h>

/// Bytes of heap memory in use (glibc mallinfo2: uordblks + hblkhd), or 0 where mallinfo2 is missing.
size_t maidian_heap_in_use(void);

#endif
