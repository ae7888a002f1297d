/*
 * cli.c: the shared helpers of cli.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"

int cli_parse_ulong(const char *flag, const char *text, unsigned long max, unsigned long *out) {
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value > max) {
        fprintf(stderr, "radixmlp: %s expects a whole number up to %lu, got '%s'\n", flag, max, text);
        return -1;
    }
    *out = value;
    return 0;
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
