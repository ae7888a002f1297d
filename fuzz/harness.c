/*
 * harness.c: the input file and the replay hooks of the file-reading fuzz targets (harness.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/bad_input_row.h"
#include "replay.h"

static char file_path[512]; /* where this process writes its input */

/* fuzz_replay_name is defined by replay.c alone: weak here, so its address is NULL under libFuzzer. */
#pragma weak fuzz_replay_name

const char *fuzz_replaying(void) { return &fuzz_replay_name != NULL ? fuzz_replay_name : NULL; }

void fuzz_violation(const char *target, const char *what, const char *detail) {
    fprintf(stderr, "%s: invariant violated: %s%s%s\n", target, what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void remove_file(void) { unlink(file_path); }

static const char *tmp_dir(void) {
    const char *dir = getenv("TMPDIR");
    return dir && dir[0] ? dir : "/tmp";
}

const char *fuzz_write_input(const char *target, const char *suffix, const uint8_t *data, size_t size) {
    const char *seed = fuzz_replaying();
    if (seed != NULL) {
        if (file_path[0] != '\0') unlink(file_path); /* the previous seed's */
        snprintf(file_path, sizeof file_path, "%s/%s", tmp_dir(), seed);
    } else if (file_path[0] == '\0') {
        snprintf(file_path, sizeof file_path, "%s/rmlp_%s.%ld%s", tmp_dir(), target, (long)getpid(), suffix);
    }
    static int cleanup_registered;
    if (!cleanup_registered) cleanup_registered = atexit(remove_file) == 0;
    FILE *f = fopen(file_path, "wb");
    if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        fuzz_violation(target, "cannot write the input file", file_path);
    return file_path;
}

void fuzz_record_refusal(const char *target, rmlp_status status, const char *message) {
    const char *seed = fuzz_replaying();
    if (seed == NULL) return;
    char input[300];
    snprintf(input, sizeof input, "fuzz seed %s/%s", target, seed);
    tu_scrub_dir = tmp_dir();
    tu_record_bad_input(input, status, message);
}
