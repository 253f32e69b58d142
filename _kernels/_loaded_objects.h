/*
 * How many shared objects the dynamic loader has added to and removed from the process
 * since it started (glibc's dl_phdr_info.dlpi_adds/dlpi_subs, glibc 2.4 and later):
 * wsesparse/_blas_libs.py scans the BLAS libraries again only when they change.
 *
 * ws_loaded_objects(out): out[0] = added, out[1] = removed; returns 1, or 0 where they
 * cannot be read (not glibc, or a loader whose records end before the counts).
 *
 * The walk holds the loader's lock for the first object only, and the callback is C: a
 * Python callback (ctypes) could wait for the GIL while holding that lock, and a thread
 * forking meanwhile left a child whose first dl_iterate_phdr hung (seen in a test).
 */
#ifndef WSESPARSE_LOADED_OBJECTS_H
#define WSESPARSE_LOADED_OBJECTS_H

#include <stddef.h>   /* (first: glibc's features.h says whether this is glibc) */

/* Python.h, included first, defines _GNU_SOURCE, which dl_iterate_phdr needs. */
#if defined(__GLIBC__) && defined(__USE_GNU)
#include <link.h>

static int ws_first_object_(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long long *out = (unsigned long long *)data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        out[0] = info->dlpi_adds;
        out[1] = info->dlpi_subs;
        out[2] = 1;
    }
    return 1;  /* the counts are the same in every record: stop at the first */
}

static int ws_loaded_objects(unsigned long long *out)
{
    unsigned long long seen[3] = {0, 0, 0};
    dl_iterate_phdr(ws_first_object_, seen);
    out[0] = seen[0];
    out[1] = seen[1];
    return (int)seen[2];
}
#else
static int ws_loaded_objects(unsigned long long *out)
{
    out[0] = out[1] = 0;
    return 0;
}
#endif

#endif
