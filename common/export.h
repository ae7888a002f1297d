/*
 * export.h: the export macro of the public entry points, and the printf-format attribute. The
 * library is built with -fvisibility=hidden; only definitions marked RMLP_EXPORT are visible in
 * libradix_mlp.so.
 */
#ifndef RMLP_COMMON_EXPORT_H
#define RMLP_COMMON_EXPORT_H

#include "radix_mlp.h"

#if defined(__GNUC__) || defined(__clang__)
#define RMLP_EXPORT __attribute__((visibility("default")))
#define RMLP_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define RMLP_EXPORT
#define RMLP_PRINTF(fmt_index, first_arg)
#endif

#endif
