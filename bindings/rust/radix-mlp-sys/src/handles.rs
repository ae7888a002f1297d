//! The opaque handles, one per object that keeps state between calls: a planner, a model, a
//! context, a batcher. `rmlp_*_create` (`rmlp_model_load`, `rmlp_model_bind_cuda`) writes one to an
//! out pointer and `rmlp_*_free` frees it; their calls are in the objects' own modules. Declared
//! apart so that every module can name every handle (the context's parameters name the attention
//! and GPU modules' types, whose calls take a context).

/// Reusable plan builder. Holds all scratch and the output arrays of the last plan, so
/// steady-state builds allocate nothing. Not thread-safe: use one planner per thread;
/// planners on different threads run concurrently. A call that finds the planner in use by
/// another thread returns `RMLP_ERR_BUSY` instead of corrupting it.
pub struct rmlp_planner {
    _opaque: [u8; 0],
}

/// A loaded model: config and weights on one device. Read-only after load: any number of
/// contexts on any threads may use it at once.
pub struct rmlp_model {
    _opaque: [u8; 0],
}

/// Workspace for running batches of up to `max_tokens` tokens through a model. One per thread
/// (or stream); per-layer calls and forwards through it never allocate. A call that finds the
/// context in a call on another thread returns `RMLP_ERR_BUSY` instead of sharing the workspace.
pub struct rmlp_context {
    _opaque: [u8; 0],
}

/// A queue of pending requests (a request is one sequence of token ids with the host's id and its
/// arrival time) from which `rmlp_batcher_next` takes batches. Its storage is allocated at
/// creation for the capacity of `rmlp_batcher_params` (requests and queued tokens): pushing and
/// taking batches allocate nothing. Single-threaded like a planner: a call that finds it in use
/// by another call returns `RMLP_ERR_BUSY` and changes nothing; a host's batching thread owns it.
pub struct rmlp_batcher {
    _opaque: [u8; 0],
}
