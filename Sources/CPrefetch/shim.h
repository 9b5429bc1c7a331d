// A software prefetch hint (no library behind it): Swift has no spelling for one. Imported by MaidianEvents only.
#ifndef MAIDIAN_PREFETCH_SHIM_H
#define MAIDIAN_PREFETCH_SHIM_H

/// Asks the CPU to start loading the cache line holding `p` for reading, into the outer caches (locality 1:
/// not the first level, where it would evict the tables a loop is using). Never faults, never blocks.
static inline void maidian_prefetch(const void *p) { __builtin_prefetch(p, 0, 1); }

#endif
