/*
 * decode_kernels.c: the decode kernels (decode_kernels.h), their bodies (decode_kernels_body.h)
 * compiled three times on x86-64 (AVX-512VL + FMA, AVX + FMA, and the baseline) and once
 * elsewhere; the pick by what the CPU has. Built with -ffp-contract=fast (CMakeLists.txt).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "decode_kernels.h"
#include "vec8.h"


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

/* The kernels three times on x86-64 (picked at run time by what the CPU has): with AVX-512, the
 * same arithmetic per element as the AVX + FMA copy, in blocks that use its 32 vector registers
 * and, for the softmax's exp and P V, sixteen lanes (so the same bits); with AVX + FMA; and the
 * baseline. Once elsewhere. */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#define KERNEL(name) name##_avx512
#define KERNEL_TARGET __attribute__((target("avx512f,avx512vl,avx,fma")))
#define KEEP(v) __asm__("" : "+v"(v))
#define DOT_ROWS 4
#define VALUES_ROWS 6
#define WIDE 1
#include "decode_kernels_body.h"
#define KERNEL(name) name##_fma
#define KERNEL_TARGET __attribute__((target("avx,fma")))
#define KEEP(v) __asm__("" : "+x"(v))
#define DOT_ROWS 2
#define VALUES_ROWS 3
#define WIDE 0
#include "decode_kernels_body.h"
#endif
#define KERNEL(name) name##_base
#define KERNEL_TARGET
#define KEEP(v) (void)0
#define DOT_ROWS 2
#define VALUES_ROWS 3
#define WIDE 0
#include "decode_kernels_body.h"

size_t decode_kernels_supported(decode_kernels *sets, size_t cap) {
    decode_kernels all[3];
    size_t n = 0;
#ifdef HAVE_X86_KERNELS
    __builtin_cpu_init();
    bool fma = __builtin_cpu_supports("avx") && __builtin_cpu_supports("fma");
    if (fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
        all[n++] = (decode_kernels){row_dots_avx512, tile_softmax_avx512, tile_values_avx512, "avx512vl", 1};
    if (fma) all[n++] = (decode_kernels){row_dots_fma, tile_softmax_fma, tile_values_fma, "avx-fma", 1};
#endif
    all[n++] = (decode_kernels){row_dots_base, tile_softmax_base, tile_values_base, "baseline", 0};
    for (size_t i = 0; i < n && i < cap; i++) sets[i] = all[i];
    return n < cap ? n : cap;
}

decode_kernels decode_kernels_pick(void) {
    decode_kernels best;
    decode_kernels_supported(&best, 1);
    return best;
}
