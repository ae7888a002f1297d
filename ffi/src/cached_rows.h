/*
 * cached_rows.h: new rows through the model on the CPU, against a prefix cache's slots: what the
 * cached forward (forward.c) and a generation step (generate.c) share. The rows (a plan whose
 * compact rows are they: ids, positions, n_compact) run every position-wise op as one matrix;
 * each layer puts their K and V into their slots before `attention` reads the keys of their
 * paths from the slots; the final-normed rows go into their slots too.
 */
#ifndef RMLP_CACHED_ROWS_H
#define RMLP_CACHED_ROWS_H

#include <stdint.h>

#include "../../cpu/cpu_ops.h"
#include "model_internal.h"

/* The attention of the rows in one layer: rows->q / out are theirs (n rows), rows->k / v the
 * layer's slots (n_slots rows of kv_dim). */
typedef void (*cached_rows_attention)(void *arg, const cpu_attention_rows *rows);

/* rows: the new rows (n_compact of them, ids and positions); slots (n_compact): each one's slot. */
void cached_rows_run(rmlp_context *context, const rmlp_plan *rows, const uint32_t *slots,
                     cached_rows_attention attention, void *arg);

#endif
