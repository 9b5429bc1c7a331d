#include <maxminddb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

// Small helpers for MaidianGeo, the only importer of this module. They exist because Swift cannot call C
// variadic functions (MMDB_get_value) and reads unions holding 128-bit integers awkwardly.

/// Looks up a raw address: 4 bytes (IPv4) or 16 bytes (IPv6), network order.
static inline MMDB_lookup_result_s maidian_mmdb_lookup_bytes(const MMDB_s *mmdb, const uint8_t *addr, int is_v6, int *mmdb_error) {
    if (is_v6) {
        struct sockaddr_in6 sa;
        memset(&sa, 0, sizeof sa);
        sa.sin6_family = AF_INET6;
        memcpy(&sa.sin6_addr, addr, 16);
        return MMDB_lookup_sockaddr(mmdb, (const struct sockaddr *)&sa, mmdb_error);
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    memcpy(&sa.sin_addr, addr, 4);
    return MMDB_lookup_sockaddr(mmdb, (const struct sockaddr *)&sa, mmdb_error);
}

/// The UTF-8 name at `field/names/locale` (`subdivisions/0/names/locale` when `field` is "subdivisions").
/// Returns MMDB_SUCCESS and sets `out`/`len` (not NUL-terminated) when found; `*out` is NULL otherwise.
static inline int maidian_mmdb_name(MMDB_entry_s *entry, const char *field, const char *locale, const char **out, uint32_t *len) {
    MMDB_entry_data_s data;
    const char *path_subdivision[] = { field, "0", "names", locale, NULL };
    const char *path_plain[] = { field, "names", locale, NULL };
    int is_list = strcmp(field, "subdivisions") == 0;
    *out = NULL;
    *len = 0;
    int status = MMDB_aget_value(entry, &data, is_list ? path_subdivision : path_plain);
    if (status != MMDB_SUCCESS) return status;
    if (data.has_data && data.type == MMDB_DATA_TYPE_UTF8_STRING) {
        *out = data.utf8_string;
        *len = data.data_size;
    }
    return MMDB_SUCCESS;
}

/// An anonymous in-memory file (Linux memfd_create), or -1. The database is copied into one so that a
/// database file rewritten in place under a running worker cannot change (or truncate) the open mapping.
static inline int maidian_memfd(const char *name) {
#ifdef SYS_memfd_create
    return (int)syscall(SYS_memfd_create, name, 1u /* MFD_CLOEXEC */);
#else
    (void)name;
    return -1;
#endif
}
