/*
 * route_key.h: the routing key of a request (docs/deploying-routing.md): which leading tokens it
 * covers, and their 64-bit hash, the same on every platform and in every process:
 *   h = FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over the covered token
 *       ids, each as its 4 little-endian bytes, lowest first;
 *   key = fmix64(h), MurmurHash3's finaliser: h ^= h >> 33; h *= 0xff51afd7ed558ccd;
 *       h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53; h ^= h >> 33
 * (the finaliser spreads FNV's last bytes over every bit, so a balancer may also take key mod K).
 */
#ifndef RMLP_BATCH_ROUTE_KEY_H
#define RMLP_BATCH_ROUTE_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How many leading tokens (n) the key covers: at most prefix_tokens; with use_separator, up to and
 * including the first `separator` among them when there is one. */
size_t route_key_span(const uint32_t *tokens, size_t n, uint32_t prefix_tokens, bool use_separator,
                      uint32_t separator);

/* The key of tokens (n) as the header above says. */
uint64_t route_key_hash(const uint32_t *tokens, size_t n);

/* key as 16 lowercase hex digits and a NUL into out (17 bytes). */
void route_key_hex(uint64_t key, char *out);

#endif
