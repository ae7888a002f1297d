/*
 * bad_input_row.h: one row of docs/errors.md's table of bad inputs. With RMLP_BAD_INPUT_TABLE=FILE in
 * the environment, the C tests (test_util.h) and the fuzz targets replaying their seed corpora
 * (fuzz/harness.c) append | call | input | status | message | for each bad input they try, the
 * call and message as the library gave them, with tu_scrub_dir (a temporary or fixture folder,
 * set by the caller) shown as DIR. scripts/bad_input_table.py gathers the rows into docs/errors.md
 * and checks they stay in sync.
 */
#ifndef RMLP_TESTS_BAD_INPUT_ROW_H
#define RMLP_TESTS_BAD_INPUT_ROW_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radix_mlp.h"

static const char *tu_scrub_dir;

static inline void tu_md_cell(FILE *f, const char *text) {
    size_t scrub_len = tu_scrub_dir ? strlen(tu_scrub_dir) : 0;
    for (const char *c = text; *c; c++) {
        if (scrub_len > 0 && strncmp(c, tu_scrub_dir, scrub_len) == 0) {
            fputs("DIR", f);
            c += scrub_len - 1;
        } else if (*c == '|') {
            fputs("\\|", f);
        } else if (*c == '\n') {
            fputc(' ', f);
        } else {
            fputc(*c, f);
        }
    }
}

static inline void tu_record_bad_input(const char *input, rmlp_status status, const char *message) {
    const char *path = getenv("RMLP_BAD_INPUT_TABLE");
    if (path == NULL || path[0] == '\0' || status == RMLP_OK) return;
    FILE *f = fopen(path, "a");
    if (f == NULL) return;
    const char *rest = strstr(message, ": "); /* messages begin with the function's name */
    int call_len = rest ? (int)(rest - message) : 0;
    fprintf(f, "| `%.*s` | ", call_len, message);
    tu_md_cell(f, input);
    fprintf(f, " | %d (%s) | ", (int)status, rmlp_status_string(status));
    tu_md_cell(f, rest ? rest + 2 : message);
    fputs(" |\n", f);
    fclose(f);
}

#endif
