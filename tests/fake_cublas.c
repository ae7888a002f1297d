/*
 * fake_cublas.c: libraries that are not the cuBLAS gpu/cublas_loader.c wants, for
 * test_cublas_loader (built once per kind, -DFAKE_CUBLAS_KIND=...):
 *   FAKE_CUBLAS_NONE   exports none of cuBLAS's names;
 *   FAKE_CUBLAS_OLD    exports every entry point, and cublasGetProperty says 11.2.1;
 *   FAKE_CUBLAS_NEW    the same saying 12.90.7: the loader takes it (its functions never run).
 */
#define FAKE_CUBLAS_NONE 0
#define FAKE_CUBLAS_OLD 1
#define FAKE_CUBLAS_NEW 2

#if FAKE_CUBLAS_KIND == FAKE_CUBLAS_NONE
int fake_cublas_nothing_here(void);
int fake_cublas_nothing_here(void) { return 0; }
#else
#if FAKE_CUBLAS_KIND == FAKE_CUBLAS_OLD
static const int version[3] = {11, 2, 1};
#else
static const int version[3] = {12, 90, 7};
#endif
int cublasGetProperty(int type, int *value);
int cublasGetProperty(int type, int *value) {
    if (type < 0 || type > 2) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    *value = version[type];
    return 0;
}
/* The other entry points, by name only: the loader resolves them, never calls them here. */
#define FAKE_ENTRY(name)                                                                                               \
    int name(void);                                                                                                    \
    int name(void) { return 14; /* CUBLAS_STATUS_INTERNAL_ERROR */ }
FAKE_ENTRY(cublasCreate_v2)
FAKE_ENTRY(cublasDestroy_v2)
FAKE_ENTRY(cublasSetStream_v2)
FAKE_ENTRY(cublasSetWorkspace_v2)
FAKE_ENTRY(cublasSetMathMode)
FAKE_ENTRY(cublasGetStatusName)
FAKE_ENTRY(cublasGetStatusString)
FAKE_ENTRY(cublasGemmEx)
#endif
