//! A server of text-embeddings-inference's shape around libradix_mlp (issue 34), from Debian's Rust
//! packages only (hyper 0.14, tokio, serde_json, prometheus): TEI's routes and JSON (routes.rs,
//! types.rs, errors.rs), validation and the tokenizer workers (validate.rs, tokenizer.rs), a queue
//! with a concurrency limit (queue.rs), one backend thread that owns the model's context with the
//! prefix cache and the library's prefix-aware batcher (backend.rs, forward.rs; the host's own
//! attention between the library's layer pieces: host_attention.rs), Prometheus
//! metrics with TEI's names (metrics.rs), flags and the `RADIX_MLP_*` switches (config.rs), and the
//! server's life with graceful shutdown (server.rs, connections.rs). docs/tei-host.md tells how to run and test it.
pub mod backend;
pub mod config;
pub mod connections;
pub mod errors;
pub mod forward;
pub mod host_attention;
pub mod metrics;
pub mod queue;
pub mod routes;
pub mod server;
pub mod tokenizer;
pub mod types;
pub mod validate;

pub use config::{AttentionMode, Config};
pub use errors::{ApiError, ErrorKind};
pub use server::Server;
