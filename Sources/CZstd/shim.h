#define ZSTD_STATIC_LINKING_ONLY 0
#include <zstd.h>
#include <zstd_errors.h>
