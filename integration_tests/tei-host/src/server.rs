//! The server's life: bind, start the backend thread (which loads the model: the routes answer 503
//! until it has), serve HTTP/1 (connections.rs) on a two-thread tokio runtime, and stop gracefully on
//! SIGTERM/SIGINT or [`Server::shutdown`]: no new connections, every request in flight answered
//! (the backend drains the queue), a request that arrives on an open connection answered 503 with
//! `Connection: close`, then the backend thread ends. A model that fails to load stops
//! the server with that message.
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::backend::{self, Loaded};
use crate::config::Config;
use crate::connection::Timeouts;
use crate::connections;
use crate::metrics::Metrics;
use crate::queue::Queue;
use crate::routes;

/// What every route and the backend share.
pub struct State {
    pub config: Config,
    pub queue: Queue,
    pub metrics: Metrics,
    /// Set by the backend thread once the model, context and tokenizer are ready.
    pub loaded: OnceLock<Loaded>,
    /// False once the backend thread has stopped.
    pub backend_alive: AtomicBool,
    /// True from the start of a graceful shutdown.
    pub stopping: AtomicBool,
}

/// Why the server stops.
enum Stop {
    Requested,
    LoadFailed(String),
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    state: Arc<State>,
    stop: mpsc::UnboundedSender<Stop>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

async fn signals() {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

impl Server {
    /// Binds `config.hostname:config.port`, starts the backend thread and the HTTP server, and
    /// returns at once (the model loads meanwhile). With `handle_signals`, SIGTERM and SIGINT
    /// start a graceful shutdown.
    pub fn start(config: Config, handle_signals: bool) -> Result<Server, String> {
        let listener = TcpListener::bind((config.hostname.as_str(), config.port))
            .map_err(|e| format!("cannot listen on {}:{}: {e}", config.hostname, config.port))?;
        listener.set_nonblocking(true).map_err(|e| format!("cannot make the socket non-blocking: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("the bound address: {e}"))?;
        let max_input = config.max_input_length.unwrap_or(config.max_batch_tokens);
        let metrics = Metrics::new(max_input);
        let (queue, jobs) = Queue::new(config.max_concurrent_requests, metrics.queue_size.clone());
        let state = Arc::new(State {
            metrics,
            config,
            queue,
            loaded: OnceLock::new(),
            backend_alive: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
        });
        let (stop, mut stopped) = mpsc::unbounded_channel();
        let backend = {
            let (state, stop) = (Arc::clone(&state), stop.clone());
            let failed = Box::new(move |e: String| {
                let _ = stop.send(Stop::LoadFailed(e));
            });
            std::thread::Builder::new()
                .name("tei-host-backend".into())
                .spawn(move || backend::main(state, jobs, failed))
                .map_err(|e| format!("cannot start the backend thread: {e}"))?
        };
        let st = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("tei-host-http".into())
            .spawn(move || -> Result<(), String> {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start the tokio runtime: {e}"))?;
                let reason = rt.block_on(async {
                    let handler_state = Arc::clone(&st);
                    let handle = move |req| routes::handle(Arc::clone(&handler_state), req);
                    let (reason_tx, reason_rx) = tokio::sync::oneshot::channel();
                    let stopping = Arc::clone(&st);
                    let signal = async move {
                        let reason = tokio::select! {
                            r = stopped.recv() => r.unwrap_or(Stop::Requested),
                            _ = async { if handle_signals { signals().await } else { std::future::pending().await } } => Stop::Requested,
                        };
                        stopping.stopping.store(true, Ordering::SeqCst);
                        let _ = reason_tx.send(reason);
                    };
                    let c = &st.config;
                    let timeouts = Timeouts { read: c.read_timeout, shutdown_grace: c.shutdown_grace };
                    let max = connections::max_connections(c.max_connections, c.tokenizer.as_ref().map_or(0, |_| c.tokenization_workers));
                    connections::serve(listener, timeouts, max, handle, signal).await;
                    reason_rx.await.unwrap_or(Stop::Requested)
                });
                // Every connection is closed: no request can reach the queue any more.
                st.queue.close();
                let joined = backend.join();
                drop(rt);
                match (reason, joined) {
                    (Stop::LoadFailed(e), _) => Err(e),
                    (Stop::Requested, Err(_)) => Err("the backend thread panicked".into()),
                    (Stop::Requested, Ok(())) => Ok(()),
                }
            })
            .map_err(|e| format!("cannot start the HTTP thread: {e}"))?;
        Ok(Server { addr, state, stop, thread: Some(thread) })
    }

    /// Waits until the model is loaded; `Err` when the server stopped first or `timeout` passed.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let start = Instant::now();
        while self.state.loaded.get().is_none() {
            if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                return Err(self.wait().err().unwrap_or_else(|| "the server stopped".into()));
            }
            if start.elapsed() > timeout {
                return Err(format!("the model did not load within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// The shared state (tests read its metrics and queue).
    pub fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// Starts a graceful shutdown and waits for it.
    pub fn shutdown(mut self) -> Result<(), String> {
        let _ = self.stop.send(Stop::Requested);
        self.wait()
    }

    /// Waits until the server has stopped (a signal, a failed load).
    pub fn wait(&mut self) -> Result<(), String> {
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| Err("the HTTP thread panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(Stop::Requested);
        let _ = self.wait();
    }
}
