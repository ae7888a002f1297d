//! Raw ABI of libradix_mlp: the one declaration of every type, constant and entry point, one
//! module per object.
//!
//! The C header is generated from this crate (`scripts/gen_header.sh`): cbindgen writes each
//! module's types and constants into `ffi/include/radix_mlp/types/<module>.h` and its functions
//! into a part, `ffi/include/radix_mlp/<module>.h`; `ffi/include/radix_mlp/types.h` includes the
//! type headers and `ffi/include/radix_mlp.h` includes types.h and the parts, each in the order the
//! modules are declared below. A module comes after those whose types it imports (`use crate::...`),
//! and its note after `mod` opens its type header. The C sources include the
//! header, so the C compiler checks each definition against what is declared here. Change the ABI
//! here, regenerate, commit both.
//!
//! Conventions: every fallible call returns an `rmlp_status` (0 ok, negative errors; values
//! are pinned once released) and, on error, leaves a message naming the argument and index in
//! the calling thread's `rmlp_last_error()`. The library never aborts, exits or prints.
//!
//! Handles (`rmlp_planner`, `rmlp_model`, `rmlp_context`) carry a magic word, set at creation and
//! cleared when freed: a call handed a freed handle or another kind of handle (a planner where a
//! context belongs) returns `RMLP_ERR_INVALID_ARGUMENT` ("context was freed or is not an
//! rmlp_context handle"), and freeing one twice does nothing the second time. This is a
//! best-effort check, not a guarantee: reading freed memory is itself undefined behaviour, and a
//! handle whose memory was reused for a new handle of the same kind looks alive. Planners and
//! contexts are single-threaded: a call that finds one in use by another call returns
//! `RMLP_ERR_BUSY` and changes nothing, whether that call runs on another thread or is the one
//! whose host attention callback made it (such a callback may call only `rmlp_attention` and
//! `rmlp_attention_compact` on the context running it: those two nest).
#![allow(non_camel_case_types)]

// In header order, each module after those whose types it uses (scripts/gen_header.py checks it):
// cbindgen writes one header per module (each `use` keeps rustfmt from sorting them).
mod status; // status codes and the last error
pub use status::*;
mod handles; // the opaque handles: planner, model, context, batcher
pub use handles::*;
mod library; // version, build flags, CPU threads
pub use library::*;
mod plan; // the planner and the plan
pub use plan::*;
mod model; // models: load, bind, configuration
pub use model::*;
mod attention; // attention and the per-layer calls
pub use attention::*;
mod gpu; // CUDA devices, attention kernels and counters
pub use gpu::*;
mod context; // contexts: the whole forward and its read-outs
pub use context::*;
mod cache; // a context's prefix KV cache
pub use cache::*;
mod generate; // generation sessions
pub use generate::*;
mod batcher; // the prefix-aware batcher
pub use batcher::*;
mod route; // the routing key
pub use route::*;
