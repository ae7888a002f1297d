/*
 * audit.h: the checks of a checkpoint as a whole, made between reading config.json and loading
 * the weights (on either device): which LM head the model uses, every weight it will use is
 * finite, tensors a sharded index lacks are reported, and so are the tensors it will not use, as
 * transformers warns of them ("Some weights of the model checkpoint were not used"): a
 * config.json with fewer layers than the checkpoint, a model_type other than the one the weights
 * were trained as, biases the architecture does not have.
 */
#ifndef RMLP_MODEL_AUDIT_H
#define RMLP_MODEL_AUDIT_H

#include <stdbool.h>

#include "checkpoint.h"

/* First decides the LM head where config.json ties it and the checkpoint has its own (lm_head.h:
 * may hide the file's head or untie config). With check_finite, refuses (RMLP_ERR_MODEL) a NaN or
 * infinity in any tensor the model uses, naming the tensor and the element. *report: NULL when
 * there is nothing to say, else a malloc'ed text (one line per finding, each ending in '\n': the
 * LM head decided, tensors a sharded index lacks, unused tensors) for the caller to free. Tensors the config calls
 * for but the checkpoint lacks are left to the weight loaders to report. `rotary_emb.inv_freq`
 * buffers of older checkpoints are ignored silently, as transformers ignores them. Errors:
 * RMLP_ERR_MODEL, RMLP_ERR_OUT_OF_MEMORY (*report then NULL). */
rmlp_status audit_checkpoint(checkpoint *ckpt, rmlp_model_config *config, bool check_finite, char **report);

#endif
