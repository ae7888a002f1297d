//! A server of text-embeddings-inference's shape around libradix_mlp (issue 34), from Debian's Rust
//! packages only (hyper 0.14, tokio, serde_json, prometheus): TEI's routes and JSON (routes.rs,
//! types.rs, errors.rs), validation and the tokenizer workers (validate.rs, tokenizer.rs), a queue
//! with a concurrency limit (queue.rs), one backend thread that owns the model's context with the
//! prefix cache and the library's prefix-aware batcher (backend.rs, forward.rs; the host's own
//! attention between the library's layer pieces: host_attention.rs), Prometheus metrics with TEI's
//! names and the per-batch profile (metrics.rs, profile.rs), what a CPU host sets for its tokenizer
//! workers and says of its threads (cpu_defaults.rs), flags and the `RADIX_MLP_*` switches
//! (config.rs), and the server's life with graceful shutdown (server.rs, connections.rs). Against
//! hostile clients (issue 49): request framing checked before hyper (framing.rs, framed_io.rs),
//! HTTP's rules and CORS (protocol.rs, cors.rs), each connection's life (connection.rs), live jobs
//! only (jobs.rs) taking turns into the batcher (fairness.rs). docs/tei-host.md tells how to run and
//! test it.
pub mod backend;
pub mod config;
pub mod connection;
pub mod connections;
pub mod cors;
pub mod cpu_defaults;
pub mod errors;
pub mod fairness;
pub mod forward;
pub mod framed_io;
pub mod framing;
pub mod host_attention;
pub mod jobs;
pub mod metrics;
pub mod profile;
pub mod protocol;
pub mod queue;
pub mod routes;
pub mod server;
pub mod tokenizer;
pub mod types;
pub mod validate;

pub use config::{AttentionMode, Config};
pub use errors::{ApiError, ErrorKind};
pub use server::Server;
