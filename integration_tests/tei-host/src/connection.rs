//! One connection's life: hyper's HTTP/1.1 with keep-alive over the framed socket (framed_io.rs),
//! half-closes allowed (a client that sends its request and shuts its sending side still gets its
//! answer), and what hyper 0.14.19 does not do for us:
//! - a connection that brings no complete request within `--read-timeout-ms` of its start or its
//!   last answer is closed (slowloris heads: hyper's `http1_header_read_timeout` never fires here);
//! - a client whose sending side ended while its request is served is probed once with an interim
//!   `100 Continue`: a peer that closed its socket answers with a reset, and the connection is
//!   dropped with its request (the route's future ends; the backend drops its work);
//! - after a stop, requests are answered 503 with `Connection: close` (routes.rs) and an idle
//!   connection is closed after `--shutdown-grace-ms`;
//! - the accept loop (connections.rs) can close it when it is idle ([`Handle::evict`]);
//! - every close is a lingering one: the sending side is shut, what the client still sends is read
//!   and dropped for a moment, so that an answer is not lost to a reset.
use std::future::Future;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::server::conn::Http;
use hyper::service::service_fn;
use hyper::{Body, Request, Response};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use crate::framed_io::{FramedIo, IoState};

/// A connection's activity: requests being answered, and when it last made progress.
pub struct Activity {
    busy: AtomicUsize,
    last: Mutex<Instant>,
    /// Notified when a request starts being answered.
    started: Notify,
}

impl Activity {
    fn touch(&self) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// How long it has been idle; None while a request is being answered.
    pub fn idle_for(&self) -> Option<Duration> {
        (self.busy.load(Ordering::SeqCst) == 0).then(|| self.last.lock().unwrap_or_else(|p| p.into_inner()).elapsed())
    }
}

/// Counts a request as in progress while it lives (also when the client goes away mid-request).
struct Busy(Arc<Activity>);

impl Busy {
    fn new(a: &Arc<Activity>) -> Busy {
        a.busy.fetch_add(1, Ordering::SeqCst);
        a.touch();
        a.started.notify_one();
        Busy(Arc::clone(a))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the accept loop holds of a live connection.
pub struct Handle {
    pub activity: Arc<Activity>,
    /// Closes the connection if it is idle when notified.
    pub evict: Notify,
    /// Set by the accept loop when it chose to evict it.
    pub evicted: AtomicBool,
}

impl Handle {
    pub fn new() -> Handle {
        Handle {
            activity: Arc::new(Activity {
                busy: AtomicUsize::new(0),
                last: Mutex::new(Instant::now()),
                started: Notify::new(),
            }),
            evict: Notify::new(),
            evicted: AtomicBool::new(false),
        }
    }
}

impl Default for Handle {
    fn default() -> Self {
        Handle::new()
    }
}

/// The timeouts a connection keeps.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// No complete request within this of the start or the last answer: closed.
    pub read: Duration,
    /// After a stop, an idle connection waits this long for a last request (answered 503).
    pub shutdown_grace: Duration,
}

/// How long a closing connection reads what the client still sends: after an answer, and when
/// an idle one is closed (its descriptor is wanted back soon).
const LINGER: Duration = Duration::from_millis(500);
const LINGER_IDLE: Duration = Duration::from_millis(100);
/// How often, and how many times, a probed connection's socket is checked for the peer's reset.
const PROBE_POLL: Duration = Duration::from_millis(10);
const PROBE_POLLS: u32 = 100;

/// Shuts the sending side, then reads and drops what arrives until the client closes, `linger`
/// passes or 1 MB came; the caller then closes the socket.
pub async fn linger_close(stream: &TcpStream, linger: Duration) {
    let _ = socket2::SockRef::from(stream).shutdown(Shutdown::Write);
    let deadline = tokio::time::Instant::now() + linger;
    let mut buf = [0u8; 4096];
    let mut budget = 1usize << 20;
    while budget > 0 {
        match tokio::time::timeout_at(deadline, stream.readable()).await {
            Ok(Ok(())) => {}
            _ => return,
        }
        match stream.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => budget = budget.saturating_sub(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Whether the socket holds an error (the peer reset it).
fn reset(stream: &TcpStream) -> bool {
    !matches!(stream.take_error(), Ok(None))
}

/// Serves `stream` with `handle` until the client is done, the connection times out, it is
/// evicted, or the server stops.
pub async fn run<H, F>(
    stream: TcpStream,
    handle: H,
    conn: Arc<Handle>,
    mut stopping: watch::Receiver<bool>,
    timeouts: Timeouts,
) where
    H: Fn(Request<Body>) -> F + Send + Sync + 'static,
    F: Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send + 'static,
{
    let _ = stream.set_nodelay(true);
    let stream = Arc::new(stream);
    let io = Arc::new(IoState::default());
    let activity = Arc::clone(&conn.activity);
    let watched = Arc::clone(&activity);
    let service = service_fn(move |req| {
        let busy = Busy::new(&watched);
        let answer = handle(req);
        async move {
            let r = answer.await;
            drop(busy);
            r
        }
    });
    let framed = FramedIo::new(Arc::clone(&stream), Arc::clone(&io));
    let mut http = Box::pin(Http::new().http1_only(true).http1_half_close(true).serve_connection(framed, service));
    let mut tick = tokio::time::interval((timeouts.read / 4).max(Duration::from_millis(5)));
    let mut stopped_at = stopping.borrow().then(Instant::now);
    let grace_end = |at: Instant| tokio::time::Instant::from_std(at + timeouts.shutdown_grace);
    let mut probed = false;
    let mut probe_polls = 0;
    // While a request is answered hyper reads nothing more once it has the body (half-closes are
    // allowed): from then the task peeks for the client's EOF itself, unless the client already
    // sent more (a pipelined request).
    let mut pipelined = false;
    let mut peeked = [0u8; 1];
    let mut linger = LINGER;
    loop {
        let busy = activity.idle_for().is_none();
        if !busy {
            pipelined = false;
        }
        let watch_eof =
            busy && !pipelined && io.between_requests.load(Ordering::SeqCst) && !io.read_closed.load(Ordering::SeqCst);
        tokio::select! {
            _ = &mut http => break,
            changed = stopping.changed(), if stopped_at.is_none() => {
                if changed.is_err() || *stopping.borrow() {
                    stopped_at = Some(Instant::now());
                }
            }
            _ = conn.evict.notified() => {
                if activity.idle_for().is_some() {
                    linger = LINGER_IDLE;
                    break;
                }
                conn.evicted.store(false, Ordering::SeqCst); // busy again: not evicted after all
            }
            _ = io.closed.notified(), if !probed => {}
            _ = activity.started.notified() => {}
            _ = io.progress.notified() => {}
            seen = stream.peek(&mut peeked), if watch_eof => match seen {
                Ok(0) => io.read_closed.store(true, Ordering::SeqCst),
                Ok(_) => pipelined = true,
                Err(_) => break, // reset
            },
            _ = tokio::time::sleep(PROBE_POLL), if probed && probe_polls < PROBE_POLLS => probe_polls += 1,
            _ = tokio::time::sleep_until(grace_end(stopped_at.unwrap_or_else(Instant::now))), if stopped_at.is_some() && !busy => {}
            _ = tick.tick() => {}
        }
        if let Some(idle) = activity.idle_for() {
            if idle > timeouts.read || stopped_at.is_some_and(|t| t.elapsed() >= timeouts.shutdown_grace) {
                linger = LINGER_IDLE;
                break;
            }
        } else if io.read_closed.load(Ordering::SeqCst) {
            // The client's sending side ended while its request is served: gone, or waiting?
            if !probed {
                probed = true;
                if !io.probe(&stream) {
                    break;
                }
            } else if reset(&stream) {
                break; // gone: drop the request (and its queued work) with the connection
            }
        }
    }
    drop(http);
    linger_close(&stream, linger).await;
}
