/*
 * export.h: the export macro of the public entry points, and the printf-format attribute. The
 * library is built with -fvisibility=hidden; only definitions marked RMLP_EXPORT are visible in
 * libradix_mlp.so. A file that defines one includes the header that declares it (radix_mlp.h, or
 * below the façade its part radix_mlp/<module>.h), so the compiler checks the definition.
 */
#ifndef RMLP_COMMON_EXPORT_H
#define RMLP_COMMON_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define RMLP_EXPORT __attribute__((visibility("default")))
#define RMLP_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define RMLP_EXPORT
#define RMLP_PRINTF(fmt_index, first_arg)
#endif

#endif
