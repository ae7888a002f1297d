/*
 * backends_none.c: libradix_mlp_plan's backends: none (the planner library runs no model), so its
 * rmlp_build_flags is 0. libradix_mlp's are backends.c.
 */
#include "common/export.h"
#include "radix_mlp.h"

RMLP_EXPORT uint32_t rmlp_build_flags(void) { return 0; }
