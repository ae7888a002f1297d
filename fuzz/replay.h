/*
 * replay.h: fuzz/replay.c runs a fuzz target's LLVMFuzzerTestOneInput on files (a seed corpus)
 * without libFuzzer, so that the committed seeds, findings included, are regression tests of the
 * ordinary CTest suite (gcc, and under ASan+UBSan in build-asan/).
 */
#ifndef RMLP_FUZZ_REPLAY_H
#define RMLP_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* The file name (no folder) of the input being replayed; defined only in replay builds. */
extern const char *fuzz_replay_name;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
