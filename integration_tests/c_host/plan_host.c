/*
 * plan_host.c: a C host of the planner alone, knowing radix_mlp only through its installed header
 * and library, as a C++ engine or any C program would. run.sh builds it against libradix_mlp_plan
 * (shared and static, which must need nothing beyond libc) and against libradix_mlp.
 * Plans the RadixMLP example batch and checks what a host relies on.
 */
#include <stdio.h>
#include <string.h>

#include <radix_mlp.h>

#define EXPECT(cond)                                                                                            \
    do {                                                                                                        \
        if (!(cond)) {                                                                                          \
            fprintf(stderr, "plan_host: check failed: %s (%s)\n", #cond, rmlp_last_error());                    \
            return 1;                                                                                           \
        }                                                                                                       \
    } while (0)

int main(void) {
    EXPECT(rmlp_version() == RMLP_VERSION); /* header and binary agree */
    /* tokens a..i; sequence 2 shares a,b,c; sequence 3 shares a,b,c too and e,f,g at the same positions */
    const uint32_t ids[] = {1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 5, 6, 7, 8, 9};
    const uint32_t pos[] = {0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 7};
    const uint32_t cu[] = {0, 7, 10, 15};
    rmlp_planner *planner = NULL;
    EXPECT(rmlp_planner_create(&planner) == RMLP_OK);
    rmlp_plan_params params = rmlp_plan_default_params();
    params.pad = true;
    rmlp_plan plan;
    EXPECT(rmlp_plan_build(planner, ids, pos, 15, cu, 3, &params, &plan) == RMLP_OK);
    EXPECT(plan.use_radix && plan.n_compact == 12 && plan.n_compact_padded == 16);
    uint32_t n_compact = plan.n_compact, n_padded = plan.n_compact_padded;
    for (uint32_t i = 0; i < plan.n_tokens; i++) {
        EXPECT(plan.compact_input_ids[plan.scatter[i]] == ids[i]);
        EXPECT(plan.compact_position_ids[plan.scatter[i]] == pos[i]);
    }
    const uint32_t bad_cu[] = {0, 9, 8, 15};
    EXPECT(rmlp_plan_build(planner, ids, pos, 15, bad_cu, 3, NULL, &plan) == RMLP_ERR_INVALID_SEQLENS);
    EXPECT(strstr(rmlp_last_error(), "cu_seqlens[2]=8 < cu_seqlens[1]=9") != NULL);
    rmlp_planner_free(planner);
    printf("plan_host: radix_mlp %s: 15 tokens -> %u compact rows (%u padded)\n", rmlp_version_string(), n_compact,
           n_padded);
    return 0;
}
