/*
 * header_cxx.cpp: radix_mlp.h as a C++ host compiles it (ctest header_cxx, with -Wall -Wextra
 * -Werror -pedantic): the status codes are a typed enum over int32_t, `rmlp_status` stays int32_t,
 * and a host's code that stores, returns and compares codes as integers compiles unchanged.
 */
#include <cstdint>
#include <type_traits>

#include "radix_mlp.h"

static_assert(std::is_same<rmlp_status, int32_t>::value, "rmlp_status is int32_t in C++ as in C");
static_assert(std::is_enum<rmlp_status_code>::value, "the codes are an enum");
static_assert(std::is_same<std::underlying_type<rmlp_status_code>::type, int32_t>::value, "typed: int32_t");
static_assert(sizeof(rmlp_status_code) == sizeof(rmlp_status), "same size as the status calls return");
static_assert(RMLP_OK == 0 && RMLP_ERR_INVALID_ARGUMENT == -1 && RMLP_ERR_FULL == -13, "values pinned");

/* A host attention written with plain integers, as hosts wrote it before the enum. */
static int32_t host_attention(void *user_data, const rmlp_attention_args *args) {
    if (args == nullptr) return RMLP_ERR_INVALID_ARGUMENT;
    rmlp_status status = user_data != nullptr ? RMLP_ERR_INTERNAL : RMLP_OK;
    status = args->layer > 4096 ? -1 : status;
    return status;
}

int main() {
    const rmlp_attention_fn callback = host_attention; /* the callback type takes it as it is */
    rmlp_status status = callback(nullptr, nullptr);
    switch (status) {
    case RMLP_ERR_INVALID_ARGUMENT: break;
    case RMLP_OK: return 1;
    default: return 2;
    }
    rmlp_status_code code = RMLP_ERR_BUSY;
    return code == -12 && status < RMLP_OK ? 0 : 3;
}
