/*
 * cli.c: the shared helpers of cli.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* Whole number in [min, max] (min 0 or 1), or -1 after printing what FLAG expects. */
static int parse_whole(const char *flag, const char *text, unsigned long min, unsigned long max, unsigned long *out) {
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    /* digits only: strtoul would also take leading spaces, a sign, and " -1" as ULONG_MAX */
    if (errno != 0 || !isdigit((unsigned char)text[0]) || *end != '\0' || value < min || value > max) {
        fprintf(stderr, "radixmlp: %s expects a whole number %s to %lu, got '%s'\n", flag, min ? "from 1" : "up", max,
                text);
        return -1;
    }
    *out = value;
    return 0;
}

int cli_parse_ulong(const char *flag, const char *text, unsigned long max, unsigned long *out) {
    return parse_whole(flag, text, 0, max, out);
}

int cli_parse_count(const char *flag, const char *text, unsigned long max, unsigned long *out) {
    return parse_whole(flag, text, 1, max, out);
}

int cli_parse_ulong_list(const char *flag, const char *text, unsigned long max, unsigned long *out, size_t cap,
                         size_t *n) {
    *n = 0;
    for (const char *item = text;; item++) {
        size_t len = strcspn(item, ",");
        char one[32];
        if (len == 0 || len >= sizeof one) {
            fprintf(stderr, "radixmlp: %s expects whole numbers up to %lu separated by commas, got '%s'\n", flag, max,
                    text);
            return -1;
        }
        if (*n == cap) {
            fprintf(stderr, "radixmlp: %s takes at most %zu numbers, got more in '%s'\n", flag, cap, text);
            return -1;
        }
        memcpy(one, item, len), one[len] = '\0';
        if (cli_parse_ulong(flag, one, max, &out[(*n)++]) != 0) return -1;
        item += len;
        if (*item == '\0') return 0;
    }
}

int cli_parse_gate(const char *flag, const char *text, rmlp_gate *out) {
    if (strcmp(text, "distinct") == 0) {
        *out = RMLP_GATE_DISTINCT;
    } else if (strcmp(text, "tei") == 0) {
        *out = RMLP_GATE_TEI;
    } else {
        fprintf(stderr, "radixmlp: %s expects distinct (this library's rule) or tei (TEI's), got '%s'\n", flag, text);
        return -1;
    }
    return 0;
}

const char *cli_gate_name(rmlp_gate gate) { return gate == RMLP_GATE_TEI ? "tei" : "distinct"; }

static const char *const ATTENTION_NAMES[] = {"full", "compact", "auto"}; /* by rmlp_attention_space */

int cli_parse_attention(const char *flag, const char *text, rmlp_attention_space *out) {
    for (int space = RMLP_ATTENTION_FULL; space <= RMLP_ATTENTION_AUTO; space++)
        if (strcmp(text, ATTENTION_NAMES[space]) == 0) {
            *out = space;
            return 0;
        }
    fprintf(stderr, "radixmlp: %s expects full, compact or auto, got '%s'\n", flag, text);
    return -1;
}

const char *cli_attention_name(rmlp_attention_space space) {
    return space >= RMLP_ATTENTION_FULL && space <= RMLP_ATTENTION_AUTO ? ATTENTION_NAMES[space] : "?";
}

int cli_parse_double(const char *flag, const char *text, double *out) {
    char *end = NULL;
    double value = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(value)) {
        fprintf(stderr, "radixmlp: %s expects a number, got '%s'\n", flag, text);
        return -1;
    }
    *out = value;
    return 0;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_sort_median(double *values, size_t n) {
    qsort(values, n, sizeof(double), compare_double);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

bool cli_case_wanted(const char *name, const char *const *only, size_t n_only) {
    bool wanted = n_only == 0;
    for (size_t i = 0; i < n_only; i++) wanted |= strstr(name, only[i]) != NULL;
    return wanted;
}

int cli_line_kind(const char *where, const char *line, size_t len) {
    if (strlen(line) != len) {
        fprintf(stderr, "radixmlp: %s: the line holds a NUL byte at byte %zu (not JSON text)\n", where,
                strlen(line) + 1);
        return -1;
    }
    return strspn(line, " \t\r\n") == len;
}

int cli_finish_output(FILE *f, const char *name) {
    int flushed = fflush(f), reason = errno;
    int failed = flushed != 0 || ferror(f);
    if (f != stdout && fclose(f) != 0 && !failed) failed = 1, flushed = -1, reason = errno;
    if (failed)
        fprintf(stderr, "radixmlp: writing %s failed: %s\n", name,
                flushed != 0 ? strerror(reason) : "a write to it failed earlier");
    return failed ? -1 : 0;
}
