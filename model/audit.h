/*
 * audit.h: the checks of a checkpoint as a whole, made between reading config.json and loading
 * the weights (on either device): every weight the model will use is finite, and the tensors it
 * will not use are reported, as transformers warns of them ("Some weights of the model checkpoint
 * were not used"): a config.json with fewer layers than the checkpoint, a model_type other than
 * the one the weights were trained as, biases the architecture does not have.
 */
#ifndef RMLP_MODEL_AUDIT_H
#define RMLP_MODEL_AUDIT_H

#include <stdbool.h>

#include "checkpoint.h"

/* With check_finite, refuses (RMLP_ERR_MODEL) a NaN or infinity in any tensor the model uses,
 * naming the tensor and the element. *report: NULL when nothing is unused, else a malloc'ed text
 * (one line per finding, each ending in '\n') for the caller to free. Tensors the config calls
 * for but the checkpoint lacks are left to the weight loaders to report. `rotary_emb.inv_freq`
 * buffers of older checkpoints are ignored silently, as transformers ignores them. Errors:
 * RMLP_ERR_MODEL, RMLP_ERR_OUT_OF_MEMORY (*report then NULL). */
rmlp_status audit_checkpoint(const checkpoint *ckpt, const rmlp_model_config *config, bool check_finite,
                             char **report);

#endif
