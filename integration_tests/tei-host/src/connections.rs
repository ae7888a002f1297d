//! The accept loop and the table of live connections (each served by connection.rs):
//! - at `--max-connections` (default: the descriptor limit less a reserve) a new connection closes
//!   the connection idle the longest; when none is idle it is answered 503 and closed;
//! - out of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM) the loop closes the connection idle the
//!   longest and backs off (5 ms doubling to 500 ms) instead of spinning on `accept`, so the
//!   connections it holds (and `/health` on a freed one) keep being served;
//! - a stop: the connections already waiting in the backlog are taken (their requests are answered
//!   503), the listener closes, each connection finishes as connection.rs says, and [`serve`]
//!   returns when the last one is gone.
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use hyper::{Body, Request, Response};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::connection::{self, Handle, Timeouts};
use crate::errors::{ApiError, ErrorKind};

/// Descriptors kept free for everything but connections (the runtime, the tokenizer workers'
/// pipes, files the model loads).
const RESERVED_DESCRIPTORS: u64 = 32;

/// The process's soft limit on open descriptors (/proc/self/limits), when it has one.
pub fn descriptor_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// `--max-connections`, or what the descriptor limit leaves (2 descriptors per tokenizer worker).
pub fn max_connections(configured: Option<usize>, tokenizer_workers: usize) -> usize {
    configured.unwrap_or_else(|| {
        let reserve = RESERVED_DESCRIPTORS + 2 * tokenizer_workers as u64;
        descriptor_limit().map_or(usize::MAX, |n| n.saturating_sub(reserve).max(1).min(usize::MAX as u64) as usize)
    })
}

/// Accept errors that mean "no descriptor or memory for another socket now".
fn out_of_descriptors(e: &std::io::Error) -> bool {
    // EMFILE 24, ENFILE 23, ENOBUFS 105, ENOMEM 12 (Linux).
    matches!(e.raw_os_error(), Some(24 | 23 | 105 | 12))
}

/// The live connections.
#[derive(Default)]
struct Table {
    next: u64,
    live: HashMap<u64, Arc<Handle>>,
}

impl Table {
    /// Connections not already being evicted.
    fn open(&self) -> usize {
        self.live.values().filter(|h| !h.evicted.load(Ordering::SeqCst)).count()
    }

    /// Asks the connection idle the longest to close; false when none is idle.
    fn evict_oldest_idle(&self) -> bool {
        let oldest = self
            .live
            .values()
            .filter(|h| !h.evicted.load(Ordering::SeqCst))
            .filter_map(|h| Some((h.activity.idle_for()?, h)))
            .max_by_key(|(idle, _)| *idle);
        match oldest {
            Some((_, h)) => {
                h.evicted.store(true, Ordering::SeqCst);
                h.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Answers a connection there is no room for: 503, closed.
async fn refuse(mut stream: TcpStream, max: usize) {
    let e =
        ApiError::new(ErrorKind::Unhealthy, format!("too many connections: {max} open and busy (--max-connections)"));
    let body = e.tei_body().to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(format!("{head}{body}").as_bytes()).await;
    connection::linger_close(&stream, Duration::from_millis(100)).await;
}

/// Serves `listener` with `handle` until `stop` completes, then stops as the header says.
pub async fn serve<H, F>(
    listener: std::net::TcpListener,
    timeouts: Timeouts,
    max_connections: usize,
    handle: H,
    stop: impl Future<Output = ()>,
) where
    H: Fn(Request<Body>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send + 'static,
{
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return eprintln!("tei-host: cannot use the listening socket: {e}"),
    };
    let table = Arc::new(Mutex::new(Table::default()));
    let (stopping_tx, stopping) = watch::channel(false);
    let (alive, mut all_closed) = mpsc::channel::<()>(1);
    let admit = |stream: TcpStream| {
        let mut t = table.lock().unwrap_or_else(|p| p.into_inner());
        if t.open() >= max_connections && !t.evict_oldest_idle() {
            tokio::spawn(refuse(stream, max_connections));
            return;
        }
        let (id, conn) = (t.next, Arc::new(Handle::new()));
        t.next += 1;
        t.live.insert(id, Arc::clone(&conn));
        let (handle, stopping, alive, table) = (handle.clone(), stopping.clone(), alive.clone(), Arc::clone(&table));
        tokio::spawn(async move {
            connection::run(stream, handle, conn, stopping, timeouts).await;
            table.lock().unwrap_or_else(|p| p.into_inner()).live.remove(&id);
            drop(alive);
        });
    };
    tokio::pin!(stop);
    let mut backoff = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut stop => break,
        };
        match accepted {
            Ok((stream, _)) => {
                backoff = Duration::ZERO;
                admit(stream);
            }
            Err(e) if out_of_descriptors(&e) => {
                table.lock().unwrap_or_else(|p| p.into_inner()).evict_oldest_idle();
                backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_millis(500));
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = &mut stop => break,
                }
            }
            Err(_) => continue, // the client gave up before the accept, and the like
        }
    }
    let _ = stopping_tx.send(true);
    // The connections the kernel already took: served (503) rather than reset with the listener.
    while let Poll::Ready(Ok((stream, _))) = std::future::poll_fn(|cx| Poll::Ready(listener.poll_accept(cx))).await {
        admit(stream);
    }
    drop(listener); // new connections are refused from here on
    drop(alive);
    let _ = all_closed.recv().await; // None once every connection task has ended
}
