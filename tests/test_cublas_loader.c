/*
 * test_cublas_loader.c: which libcublas a CUDA model opens (gpu/cublas_loader.h), without a device.
 *   - the names tried: RADIX_MLP_CUBLAS alone when set; else libcublas.so.<runtime major>, then
 *     $CUDA_HOME, $CUDA_PATH and /usr/local/cuda's lib64, without duplicates;
 *   - fake libraries (tests/fake_cublas.c) refused by name with their reason (no cuBLAS symbol,
 *     cuBLAS 11), a missing file with dlerror's, and the first good one taken, its entry points set;
 *   - with CUDA_DIR MAJOR: a real libcublas (the toolkit's; scripts/check_cuda12.sh passes PyPI's
 *     CUDA 12.9 one) found through CUDA_DIR as $CUDA_HOME, every entry point gpu/blas.cu uses
 *     exported, and its version (cublasGetProperty, which needs no device) of major MAJOR.
 * Usage: test_cublas_loader FAKE_NONE.so FAKE_OLD.so FAKE_NEW.so [CUDA_DIR MAJOR]
 */
#include "gpu/cublas_loader.h"

#include "test_util.h"

static gpu_cublas_candidate candidate(const char *name, const char *why) {
    gpu_cublas_candidate c;
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.why, sizeof c.why, "%s", why);
    return c;
}

static void test_candidates(void) {
    gpu_cublas_candidate c[GPU_CUBLAS_MAX_CANDIDATES];
    size_t n = gpu_cublas_candidates("/opt/x/libcublas.so.12", 13, "/cuda-home", NULL, c);
    CHECK(n == 1 && strcmp(c[0].name, "/opt/x/libcublas.so.12") == 0 && strcmp(c[0].why, GPU_CUBLAS_ENV) == 0,
          "RADIX_MLP_CUBLAS alone: %zu names, first %s (%s)", n, c[0].name, c[0].why);
    n = gpu_cublas_candidates("", 12, NULL, NULL, c);
    CHECK(n == 2 && strcmp(c[0].name, "libcublas.so.12") == 0 && strcmp(c[0].why, "CUDA runtime 12") == 0 &&
              strcmp(c[1].name, "/usr/local/cuda/lib64/libcublas.so.12") == 0,
          "RADIX_MLP_CUBLAS empty = unset: %zu names, %s, %s", n, c[0].name, n > 1 ? c[1].name : "-");
    n = gpu_cublas_candidates(NULL, 13, "/h", "/p", c);
    CHECK(n == 4 && strcmp(c[0].name, "libcublas.so.13") == 0 && strcmp(c[1].name, "/h/lib64/libcublas.so.13") == 0 &&
              strcmp(c[1].why, "$CUDA_HOME") == 0 && strcmp(c[2].name, "/p/lib64/libcublas.so.13") == 0 &&
              strcmp(c[3].name, "/usr/local/cuda/lib64/libcublas.so.13") == 0,
          "runtime major, $CUDA_HOME, $CUDA_PATH, the default place: %zu names", n);
    n = gpu_cublas_candidates(NULL, 13, "/usr/local/cuda", "/usr/local/cuda", c);
    CHECK(n == 2, "the same place named three times is tried once: %zu names", n);
}

/* Opening: fakes refused by name and reason, the first good one taken. */
static void test_open(const char *none, const char *old, const char *good) {
    gpu_cublas_candidate c[] = {candidate("/nonexistent/libcublas.so.12", "missing"), candidate(none, "no symbols"),
                                candidate(old, "cuBLAS 11"), candidate(good, "fake 12"),
                                candidate("/nonexistent/never-tried.so", "after")};
    gpu_cublas_lib lib;
    char error[2048];
    int rc = gpu_cublas_open(c, 3, &lib, error, sizeof error);
    CHECK(rc == -1 && lib.handle == NULL, "three bad ones: rc %d", rc);
    for (size_t i = 0; i < GPU_CUBLAS_N_ENTRY_POINTS; i++)
        CHECK(lib.entry[i] == NULL, "entry point %s not left set after a failure", gpu_cublas_entry_points[i]);
    char want[3][1100];
    snprintf(want[0], sizeof want[0], "/nonexistent/libcublas.so.12 (missing): cannot open shared object file");
    snprintf(want[1], sizeof want[1], "%s (no symbols): has no symbol cublasCreate_v2: not cuBLAS", none);
    snprintf(want[2], sizeof want[2], "%s (cuBLAS 11): is cuBLAS 11.2.1, older than 12", old);
    for (int i = 0; i < 3; i++) CHECK(strstr(error, want[i]) != NULL, "error names \"%s\": %s", want[i], error);
    CHECK(strstr(error, want[0]) < strstr(error, want[1]) && strstr(error, want[1]) < strstr(error, want[2]),
          "in the order tried: %s", error);

    rc = gpu_cublas_open(c, 5, &lib, error, sizeof error);
    CHECK(rc == 0 && lib.handle != NULL && strcmp(lib.name, good) == 0, "the fourth, good one taken: rc %d, %s: %s",
          rc, lib.name, error);
    CHECK(lib.major == 12 && lib.minor == 90 && lib.patch == 7, "its version 12.90.7: %d.%d.%d", lib.major, lib.minor,
          lib.patch);
    for (size_t i = 0; i < GPU_CUBLAS_N_ENTRY_POINTS; i++)
        CHECK(lib.entry[i] != NULL, "entry point %s set", gpu_cublas_entry_points[i]);
    CHECK(strstr(error, "never-tried") == NULL, "nothing after the good one tried: %s", error);

    char small[40];
    rc = gpu_cublas_open(c, 3, &lib, small, sizeof small);
    CHECK(rc == -1 && strlen(small) == sizeof small - 1, "the message is cut at its capacity: %zu", strlen(small));
    rc = gpu_cublas_open(c, 0, &lib, error, sizeof error);
    CHECK(rc == -1 && strcmp(error, "no name to try") == 0, "no candidates: %s", error);
}

/* A real libcublas of major `major` under cuda_dir/lib64, through the names the library tries. */
static void test_real(const char *cuda_dir, int major) {
    gpu_cublas_candidate c[GPU_CUBLAS_MAX_CANDIDATES];
    size_t n = gpu_cublas_candidates(NULL, major, cuda_dir, NULL, c);
    gpu_cublas_lib lib;
    char error[2048];
    int rc = gpu_cublas_open(c, n, &lib, error, sizeof error);
    if (!CHECK(rc == 0, "libcublas.so.%d under %s/lib64 loads: %s", major, cuda_dir, error)) return;
    CHECK(lib.major == major, "%s reports major %d, want %d", lib.name, lib.major, major);
    int check_minor = -1;
    int (*get_property)(int, int *);
    *(void **)&get_property = lib.entry[GPU_CUBLAS_GET_PROPERTY];
    CHECK(get_property(1, &check_minor) == 0 && check_minor == lib.minor, "cublasGetProperty again: minor %d",
          check_minor);
    printf("cuBLAS %d.%d.%d loaded from %s, every entry point of gpu/blas.cu found\n", lib.major, lib.minor,
           lib.patch, lib.name);
    if (error[0]) printf("  tried before it: %s\n", error);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: %s FAKE_NONE.so FAKE_OLD.so FAKE_NEW.so [CUDA_DIR MAJOR]\n", argv[0]);
        return 2;
    }
    test_candidates();
    test_open(argv[1], argv[2], argv[3]);
    if (argc == 6)
        test_real(argv[4], atoi(argv[5]));
    else
        printf("no real libcublas checked (no CUDA_DIR MAJOR given)\n");
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    return tu_failed != 0;
}
