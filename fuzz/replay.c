/*
 * replay.c: `fuzz_X_replay FILE_OR_DIR...`: every file named, and every file of every folder
 * named (sorted by name), through the target's LLVMFuzzerTestOneInput, one at a time, each in a
 * buffer of exactly its size. An invariant violation aborts (the test fails, the seed's name is
 * printed first); otherwise prints how many inputs passed. Input files the harness writes go to
 * a private temporary folder ($TMPDIR for the harness), emptied and removed at the end.
 */
#define _POSIX_C_SOURCE 200809L

#include "replay.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *fuzz_replay_name;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs one file; returns 0, or -1 when it cannot be read. */
static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return -1;
    size_t cap = 4096, size = 0, got;
    uint8_t *data = malloc(cap);
    while (data != NULL && (got = fread(data + size, 1, cap - size, f)) > 0) {
        size += got;
        if (size == cap) {
            uint8_t *grown = realloc(data, cap *= 2);
            if (grown == NULL) free(data);
            data = grown;
        }
    }
    int failed = data == NULL || ferror(f);
    fclose(f);
    if (failed) {
        free(data);
        return -1;
    }
    uint8_t *exact = malloc(size ? size : 1); /* ASan sees a read one past the end */
    if (exact == NULL) {
        free(data);
        return -1;
    }
    memcpy(exact, data, size);
    free(data);
    const char *slash = strrchr(path, '/');
    fuzz_replay_name = slash ? slash + 1 : path;
    fprintf(stderr, "replay: %s\n", path);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    return 0;
}

/* Runs every regular file of a folder, sorted; returns the count, or -1 on an unreadable file. */
static long replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **grown = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (grown == NULL) break;
            names = grown;
        }
        names[n] = strdup(e->d_name);
        if (names[n] != NULL) n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    long count = 0;
    char path[4096];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (count >= 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) count = replay_file(path) == 0 ? count + 1 : -1;
        free(names[i]);
    }
    free(names);
    return count;
}

/* Removes the files of the temporary folder (the harness leaves its last input there), then it. */
static int empty_and_remove(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return rmdir(dir);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    char tmp[] = "/tmp/rmlp_replay.XXXXXX";
    if (mkdtemp(tmp) == NULL || setenv("TMPDIR", tmp, 1) != 0) {
        perror("replay: temporary folder");
        return 1;
    }
    long total = 0;
    int status = 0;
    for (int i = 1; i < argc && status == 0; i++) {
        struct stat st;
        long n = stat(argv[i], &st) != 0 ? -1 : S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0;
        if (n < 0) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            status = 1;
        } else if (n == 0) {
            fprintf(stderr, "replay: %s holds no input\n", argv[i]);
            status = 1;
        }
        total += n > 0 ? n : 0;
    }
    fuzz_replay_name = NULL;
    if (empty_and_remove(tmp) != 0) {
        fprintf(stderr, "replay: cannot remove %s\n", tmp);
        status = 1;
    }
    printf("%ld inputs replayed%s\n", total, status == 0 ? ", all invariants held" : "");
    return status;
}
