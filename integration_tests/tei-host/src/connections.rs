//! Accepting and serving connections (HTTP/1.1 with keep-alive, hyper's `Http`), with the two
//! things hyper 0.14.19 does not do for us: a connection that brings no complete request within
//! `--read-timeout-ms` of its start or of its last answer is closed (slowloris headers; hyper's own
//! `http1_header_read_timeout` never fires in this version, as tests/faults.rs showed), and a
//! graceful stop: no new connections, idle ones closed, busy ones closed after their answer, and
//! [`serve`] returns when the last one is gone.
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::server::conn::Http;
use hyper::service::service_fn;
use hyper::{Body, Request, Response};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

/// A connection's activity: requests being answered, and when it last made progress.
struct Activity {
    busy: AtomicUsize,
    last: Mutex<Instant>,
}

impl Activity {
    fn touch(&self) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
    fn idle_for(&self) -> Option<Duration> {
        (self.busy.load(Ordering::SeqCst) == 0).then(|| self.last.lock().unwrap_or_else(|p| p.into_inner()).elapsed())
    }
}

/// Counts a request as in progress while it lives (also when the client goes away mid-request).
struct Busy(Arc<Activity>);

impl Busy {
    fn new(a: &Arc<Activity>) -> Busy {
        a.busy.fetch_add(1, Ordering::SeqCst);
        a.touch();
        Busy(Arc::clone(a))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves `listener` with `handle` until `stop` completes, then stops gracefully.
pub async fn serve<H, F>(listener: std::net::TcpListener, timeout: Duration, handle: H, stop: impl Future<Output = ()>)
where
    H: Fn(Request<Body>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send + 'static,
{
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return eprintln!("tei-host: cannot use the listening socket: {e}"),
    };
    let (stopping_tx, stopping) = watch::channel(false);
    let (alive, mut all_closed) = mpsc::channel::<()>(1);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue, // out of descriptors and the like: the next accept may work
            },
            _ = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let (handle, mut stopping, alive) = (handle.clone(), stopping.clone(), alive.clone());
        tokio::spawn(async move {
            let activity = Arc::new(Activity { busy: AtomicUsize::new(0), last: Mutex::new(Instant::now()) });
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
            let conn = Http::new().http1_only(true).serve_connection(stream, service);
            tokio::pin!(conn);
            let mut tick = tokio::time::interval(timeout / 4);
            let mut told = false;
            loop {
                tokio::select! {
                    _ = &mut conn => break,
                    changed = stopping.changed(), if !told => {
                        told = true;
                        if changed.is_ok() {
                            conn.as_mut().graceful_shutdown();
                        }
                    }
                    _ = tick.tick() => {
                        if activity.idle_for().is_some_and(|idle| idle > timeout) {
                            break; // no complete request in time: drop the connection
                        }
                    }
                }
            }
            drop(alive);
        });
    }
    drop(listener); // new connections are refused from here on
    let _ = stopping_tx.send(true);
    drop(alive);
    let _ = all_closed.recv().await; // None once every connection task has ended
}
