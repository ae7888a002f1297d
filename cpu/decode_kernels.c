/*
 * decode_kernels.c: the decode kernels (decode_kernels.h), their bodies (decode_kernels_body.h)
 * compiled twice on x86-64 (AVX + FMA, and the baseline) and once elsewhere; the pick by what the
 * CPU has. Built with -ffp-contract=fast (CMakeLists.txt).
 */
#include <math.h>
#include <string.h>

#include "decode_kernels.h"

/* Eight floats, and eight ints of the same size (a comparison's lanes: -1 true, 0 false). */
typedef float v8 __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));

#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8))
#define STORE8(p, v) memcpy((p), &(v), sizeof(v8))
/* Lanes 0, 2 of a, 0, 2 of b, 4, 6 of a, 4, 6 of b (EVENS); 1, 3, ... (ODDS): one shufps each.
 * Lanes 0-3 of a, 0-3 of b (LOWS); 4-7 of a, 4-7 of b (HIGHS): one vperm2f128 each. */
#if defined(__clang__) || __GNUC__ >= 12
#define EVENS(a, b) __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14)
#define ODDS(a, b) __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15)
#define LOWS(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11)
#define HIGHS(a, b) __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15)
#else
#define EVENS(a, b) __builtin_shuffle(a, b, (v8i){0, 2, 8, 10, 4, 6, 12, 14})
#define ODDS(a, b) __builtin_shuffle(a, b, (v8i){1, 3, 9, 11, 5, 7, 13, 15})
#define LOWS(a, b) __builtin_shuffle(a, b, (v8i){0, 1, 2, 3, 8, 9, 10, 11})
#define HIGHS(a, b) __builtin_shuffle(a, b, (v8i){4, 5, 6, 7, 12, 13, 14, 15})
#endif

/* The kernels twice on x86-64 (AVX + FMA, picked at run time where the CPU has both, and the
 * baseline), once elsewhere. */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_FMA_KERNELS 1
#define KERNEL(name) name##_fma
#define KERNEL_TARGET __attribute__((target("avx,fma")))
#define KEEP(v) __asm__("" : "+x"(v))
#include "decode_kernels_body.h"
#undef KERNEL
#undef KERNEL_TARGET
#undef KEEP
#endif
#define KERNEL(name) name##_base
#define KERNEL_TARGET
#define KEEP(v) (void)0
#include "decode_kernels_body.h"
#undef KERNEL
#undef KERNEL_TARGET
#undef KEEP

decode_kernels decode_kernels_pick(void) {
#ifdef HAVE_FMA_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("fma"))
        return (decode_kernels){row_dots_fma, tile_softmax_fma, tile_values_fma};
#endif
    return (decode_kernels){row_dots_base, tile_softmax_base, tile_values_base};
}
