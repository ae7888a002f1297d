/*
 * route_key.c: the routing key's span, hash and header text (route_key.h).
 */
#include "route_key.h"

size_t route_key_span(const uint32_t *tokens, size_t n, uint32_t prefix_tokens, bool use_separator,
                      uint32_t separator) {
    size_t span = n < prefix_tokens ? n : prefix_tokens;
    if (use_separator)
        for (size_t i = 0; i < span; i++)
            if (tokens[i] == separator) return i + 1;
    return span;
}

uint64_t route_key_hash(const uint32_t *tokens, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        for (int byte = 0; byte < 4; byte++) {
            h ^= (tokens[i] >> (8 * byte)) & 0xffu;
            h *= 0x100000001b3ull;
        }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

void route_key_hex(uint64_t key, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) out[i] = digits[(key >> (60 - 4 * i)) & 0xf];
    out[16] = '\0';
}
