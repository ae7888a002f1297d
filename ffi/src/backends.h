/*
 * backends.h: the backend tables this build holds (common/backend.h), and the pick of a model's
 * by its device (backends.c): the CPU's always, CUDA's in a CUDA build.
 */
#ifndef RMLP_FFI_BACKENDS_H
#define RMLP_FFI_BACKENDS_H

#include "common/backend.h"
#include "radix_mlp.h"

/* The table of `device` (RMLP_DEVICE_CPU or CUDA), or NULL when this build has none. */
const rmlp_backend *rmlp_backend_for(rmlp_device device);

/* rmlp_backend_for the params->device of a model, or RMLP_ERR_UNSUPPORTED saying the build lacks it. */
rmlp_status rmlp_backend_pick(const char *fn, rmlp_device device, const rmlp_backend **out);

#endif
