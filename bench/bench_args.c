/*
 * bench_args.c: `radixmlp bench`'s options (bench_args.h): each value checked as it is read
 * (bench/cli.h's counts), then the options checked against each other, then the defaults of the
 * device (--layers, --repeat, --dtype) filled in.
 */
#include <stdio.h>
#include <string.h>

#include "bench_args.h"
#include "bench_cuda.h"
#include "bench_trace.h"
#include "cli.h"

const char *const BENCH_DTYPE_NAMES[3] = {"f32", "f16", "bf16"};

/* Qwen3-0.6B, -4B and -8B, and Gemma-2B (the yes/no reranker bge-reranker-v2-gemma: one KV head of
 * 256, GeGLU 16,384 wide), as their config.json gives them (--shape). */
static const model_shape shapes[] = {
    {"qwen3-0.6b", "0.6b", RMLP_ARCH_QWEN3, 1024, 3072, 16, 8, 128, 28, true, 1e6},
    {"qwen3-4b", "4b", RMLP_ARCH_QWEN3, 2560, 9728, 32, 8, 128, 36, true, 1e6},
    {"qwen3-8b", "8b", RMLP_ARCH_QWEN3, 4096, 12288, 32, 8, 128, 36, false, 1e6},
    {"gemma-2b", "gemma", RMLP_ARCH_GEMMA, 2048, 16384, 8, 1, 256, 18, true, 1e4},
};

static int usage(FILE *to) {
    fprintf(to, "usage: radixmlp bench [--device cpu|cuda] [--dtype f32|f16|bf16] [--json] [--layers L] [--repeat R]\n"
                "                      [--full | --quick | --case NAME...] [--list] [--shape 0.6b|4b|8b|gemma-2b]\n"
                "                      [--keep-model DIR | --model DIR] [--cpu-weights f32|bf16]\n"
                "                      [--dump-batches FILE] [--batches FILE]\n"
                "                      [--trace rerank|long_prefix|no_sharing|all [--cache-mb N] [--passages P]]\n"
                "                      [--decode [--decode-steps N]] [--gpu-variant NAME=VALUE[,NAME=VALUE]]...\n"
                "       radixmlp bench --serve [options]: serving traces, FIFO vs prefix batching (--serve --help)\n"
                "  the cases: one per regime (deep sharing, a reranker's batch, nothing shared; about a minute\n"
                "                 on 2 cores); --full: the whole grid (11 cases); --quick: its three smallest;\n"
                "                 --case: those whose name contains NAME; --list: print them with N, N' and\n"
                "                 the estimated time, and run nothing\n"
                "  --device cpu (default): f32, --layers 2, --repeat 1 (the fastest of R alternating off/on runs)\n"
                "  --device cuda: device 0, --dtype bf16, all the shape's layers, --repeat 5 (median and min of R\n"
                "                 rounds of off, on and on with compact attention after a warm-up round, timed with\n"
                "                 CUDA events)\n"
                "  --cpu-weights bf16: the CPU model's layer matrices held in bf16 (fp32 activations and sums)\n"
                "  --shape: the built-in random model shaped like Qwen3-0.6B (default), -4B or -8B, or Gemma-2B\n"
                "           (bge-reranker-v2-gemma's: one KV head of 256, GeGLU); vocabulary 8,192\n"
                "  --batches FILE: the batches of FILE, JSON lines {\"case\", \"input_ids\", \"cu_seqlens\"} (what\n"
                "                 --dump-batches writes), in place of the built-in cases\n"
                "  --trace NAME: a stream of batches through a context without and with the prefix cache (CPU;\n"
                "                --cache-mb, default 1024; --passages per query of the rerank trace, default 32)\n"
                "  --decode: generation steps: batched with and without shared-prefix attention vs one at a time,\n"
                "                shared prefix 1024/2048, M = 1..64 (--decode-steps per session, default 16)\n"
                "  --gpu-variant: with --device cuda, the cases again in contexts made with these RADIX_MLP_GPU_*\n"
                "                 settings (RADIX_MLP_GPU_DECODE=own, ...), interleaved with the default's\n");
    return to == stdout ? 0 : 2;
}

int bench_args_parse(int argc, char **argv, bench_args *a) {
    *a = (bench_args){.dtype = -1};
    for (int i = 0; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--json") == 0) a->json = 1;
        else if (strcmp(flag, "--quick") == 0) a->quick = 1;
        else if (strcmp(flag, "--full") == 0) a->full = 1;
        else if (strcmp(flag, "--list") == 0) a->list = 1;
        else if (strcmp(flag, "--decode") == 0) a->decode = 1;
        else if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) return usage(stdout) - 1;
        else if (i + 1 >= argc) {
            fprintf(stderr, "radixmlp: unknown option or missing value: %s\n", flag);
            return usage(stderr);
        } else if (strcmp(flag, "--layers") == 0) {
            if (cli_parse_count(flag, argv[++i], 64, &a->layers) != 0) return 2;
        } else if (strcmp(flag, "--repeat") == 0) {
            if (cli_parse_count(flag, argv[++i], 100, &a->repeat) != 0) return 2;
        } else if (strcmp(flag, "--case") == 0) {
            if (a->n_only == sizeof a->only / sizeof a->only[0]) {
                fprintf(stderr, "radixmlp: --case may be given at most %zu times\n", a->n_only);
                return 2;
            }
            a->only[a->n_only++] = argv[++i];
        } else if (strcmp(flag, "--keep-model") == 0) a->keep_model = argv[++i];
        else if (strcmp(flag, "--shape") == 0) {
            const char *v = argv[++i];
            a->shape = NULL;
            for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
                if (strcmp(v, shapes[k].name) == 0 || strcmp(v, shapes[k].alias) == 0) a->shape = &shapes[k];
            if (a->shape == NULL) {
                fprintf(stderr, "radixmlp: --shape expects 0.6b, 4b or 8b (Qwen3's) or gemma-2b, got '%s'\n", v);
                return 2;
            }
        }
        else if (strcmp(flag, "--model") == 0) a->model_dir = argv[++i];
        else if (strcmp(flag, "--dump-batches") == 0) a->dump_path = argv[++i];
        else if (strcmp(flag, "--batches") == 0) a->batches_path = argv[++i];
        else if (strcmp(flag, "--trace") == 0) {
            a->trace = argv[++i];
            if (!bench_trace_known(a->trace)) {
                fprintf(stderr, "radixmlp: --trace expects rerank, long_prefix, no_sharing or all, got '%s'\n", a->trace);
                return 2;
            }
        } else if (strcmp(flag, "--cache-mb") == 0) {
            if (cli_parse_count(flag, argv[++i], 1ul << 20, &a->cache_mb) != 0) return 2;
        } else if (strcmp(flag, "--gpu-variant") == 0) {
            if (a->n_variants == sizeof a->variants / sizeof a->variants[0]) {
                fprintf(stderr, "radixmlp: --gpu-variant may be given at most %zu times\n", a->n_variants);
                return 2;
            }
            if (bench_cuda_variant_check(argv[++i]) != 0) return 2;
            a->variants[a->n_variants++] = argv[i];
        } else if (strcmp(flag, "--decode-steps") == 0) {
            if (cli_parse_count(flag, argv[++i], 100000, &a->decode_steps) != 0) return 2;
        } else if (strcmp(flag, "--passages") == 0) {
            if (cli_parse_count(flag, argv[++i], 4096, &a->passages) != 0) return 2;
        }
        else if (strcmp(flag, "--device") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
                fprintf(stderr, "radixmlp: --device expects cpu or cuda, got '%s'\n", v);
                return 2;
            }
            a->cuda = strcmp(v, "cuda") == 0;
        } else if (strcmp(flag, "--cpu-weights") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "f32") != 0 && strcmp(v, "bf16") != 0) {
                fprintf(stderr, "radixmlp: --cpu-weights expects f32 or bf16, got '%s'\n", v);
                return 2;
            }
            a->cpu_weights = strcmp(v, "bf16") == 0 ? RMLP_DTYPE_BF16 : RMLP_DTYPE_F32;
        } else if (strcmp(flag, "--dtype") == 0) {
            const char *v = argv[++i];
            for (int d = 0; d < 3; d++)
                if (strcmp(v, BENCH_DTYPE_NAMES[d]) == 0) a->dtype = d;
            if (a->dtype < 0) {
                fprintf(stderr, "radixmlp: --dtype expects f32, f16 or bf16, got '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "radixmlp: unknown option: %s\n", flag);
            return usage(stderr);
        }
    }
    if (a->keep_model && a->model_dir) {
        fprintf(stderr, "radixmlp: --keep-model writes the built-in model, --model loads another: give one\n");
        return 2;
    }
    if (a->full && (a->quick || a->n_only || a->batches_path)) {
        fprintf(stderr, "radixmlp: --full runs the whole built-in grid; %s picks other cases: give one\n",
                a->quick ? "--quick" : a->n_only ? "--case" : "--batches");
        return 2;
    }
    if ((a->full || a->list) && (a->trace || a->decode)) {
        fprintf(stderr, "radixmlp: --%s is about the cases; --%s runs its own\n", a->full ? "full" : "list",
                a->trace ? "trace" : "decode");
        return 2;
    }
    if (a->list && a->dump_path) {
        fprintf(stderr, "radixmlp: --list runs nothing, so --dump-batches has nothing to write\n");
        return 2;
    }
    if (a->batches_path && a->quick) {
        fprintf(stderr, "radixmlp: --quick picks built-in cases, --batches %s brings its own: give one\n",
                a->batches_path);
        return 2;
    }
    if (a->model_dir && (a->layers || a->shape)) {
        fprintf(stderr, "radixmlp: --%s shapes the built-in model; --model %s has its own\n",
                a->layers ? "layers" : "shape", a->model_dir);
        return 2;
    }
    if (!a->cuda && a->dtype > RMLP_DTYPE_F32) {
        fprintf(stderr, "radixmlp: --dtype %s needs --device cuda (the CPU computes in f32; --cpu-weights bf16 "
                        "holds its weights in bf16)\n", BENCH_DTYPE_NAMES[a->dtype]);
        return 2;
    }
    if (a->cuda && a->cpu_weights != RMLP_DTYPE_F32) {
        fprintf(stderr, "radixmlp: --cpu-weights is for --device cpu (CUDA holds its weights in --dtype)\n");
        return 2;
    }
    if (a->trace && (a->cuda || a->quick || a->batches_path || a->n_only)) {
        fprintf(stderr, "radixmlp: --trace runs on the CPU, without --quick, --batches or --case\n");
        return 2;
    }
    if (a->decode && (a->quick || a->batches_path || a->trace)) {
        fprintf(stderr, "radixmlp: --decode runs without --quick, --batches or --trace\n");
        return 2;
    }
    if (a->dump_path && (a->trace || a->decode)) {
        fprintf(stderr, "radixmlp: --dump-batches writes the cases' batches; --%s has none to write\n",
                a->trace ? "trace" : "decode");
        return 2;
    }
    if ((a->cache_mb || a->passages) && !a->trace) {
        fprintf(stderr, "radixmlp: --%s sizes the traces: it needs --trace\n", a->cache_mb ? "cache-mb" : "passages");
        return 2;
    }
    if (a->decode_steps && !a->decode) {
        fprintf(stderr, "radixmlp: --decode-steps needs --decode\n");
        return 2;
    }
    if (a->n_variants && !a->cuda) {
        fprintf(stderr, "radixmlp: --gpu-variant sets CUDA contexts' switches: it needs --device cuda\n");
        return 2;
    }
    if (a->decode_steps == 0) a->decode_steps = 16;
    if (a->cache_mb == 0) a->cache_mb = 1024;
    if (a->passages == 0) a->passages = 32;
    if (a->dtype < 0) a->dtype = a->cuda ? RMLP_DTYPE_BF16 : RMLP_DTYPE_F32;
    if (a->shape == NULL) a->shape = &shapes[0];
    a->model_name = a->model_dir ? a->model_dir : a->shape->name;
    if (a->layers == 0) a->layers = a->cuda ? a->shape->layers : 2;
    if (a->repeat == 0) a->repeat = a->cuda ? 5 : 1;
    return 0;
}

