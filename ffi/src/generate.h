/*
 * generate.h: a context's generation session (generate.c), as the context's other code sees it.
 */
#ifndef RMLP_FFI_GENERATE_H
#define RMLP_FFI_GENERATE_H

struct generate_session;

/* Frees a session's memory without touching the cache (the context is being freed). NULL: no-op. */
void generate_session_free(struct generate_session *session);

#endif
