/*
 * report_append.h: the append step of the load report's builders (audit.c, config_keys.c), which
 * run twice: with buf NULL to measure a line, then into a buffer of that size.
 */
#ifndef RMLP_MODEL_REPORT_APPEND_H
#define RMLP_MODEL_REPORT_APPEND_H

#include <stdio.h>

/* Appends to buf (cap bytes; NULL to measure) at *len, as snprintf would, moving *len on. */
#define APPEND(buf, cap, len, ...) \
    (*(len) += (size_t)snprintf((buf) && *(len) < (cap) ? (buf) + *(len) : NULL, \
                                (buf) && *(len) < (cap) ? (cap) - *(len) : 0, __VA_ARGS__))

#endif
