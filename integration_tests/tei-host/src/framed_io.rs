//! A connection's socket as hyper sees it: reads pass through [`framing`] so that each request's
//! head is checked whole before hyper reads any of it (a refused head is replaced by a synthetic
//! one that the routes answer with the reason, and nothing after it is read), and writes are
//! tracked so that the connection's task (connection.rs) knows when a response is being written.
//! The socket is shared (`Arc<TcpStream>`, tokio's `&self` calls) with that task, which reads the
//! socket's error and writes the liveness probe of a half-closed connection.
use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::framing::{self, Body, ChunkReader, Head, Step, MAX_HEAD};

/// What the connection's task and the socket share.
#[derive(Default)]
pub struct IoState {
    /// The client's sending side ended (EOF): it half-closed, or it went away.
    pub read_closed: AtomicBool,
    /// Notified once when `read_closed` is set.
    pub closed: Notify,
    /// hyper has written bytes it has not flushed yet: a response is going out.
    pub writing: AtomicBool,
    /// The last request read is HTTP/1.0 (no interim answers may be sent to it).
    pub http10: AtomicBool,
    /// Every byte read so far has gone to hyper and ends a request: what the socket holds next is
    /// a new request (or EOF). Notified through `progress` when it becomes so.
    pub between_requests: AtomicBool,
    pub progress: Notify,
    /// Bytes written before anything hyper writes next (the probe, when the socket took part of it).
    pending: Mutex<Vec<u8>>,
}

/// An interim response every HTTP/1.1 client reads past (RFC 9110 §15.2); a peer that closed its
/// socket answers it with a reset.
const PROBE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

impl IoState {
    /// Writes the probe unless a response is going out or the client speaks HTTP/1.0 (RFC 9110
    /// §15.2: no 1xx to it); false when the socket refused it.
    pub fn probe(&self, stream: &TcpStream) -> bool {
        if self.writing.load(Ordering::SeqCst) || self.http10.load(Ordering::SeqCst) {
            return true;
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if !pending.is_empty() {
            return true;
        }
        match stream.try_write(PROBE) {
            Ok(n) => {
                pending.extend_from_slice(&PROBE[n..]);
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                pending.extend_from_slice(PROBE);
                true
            }
            Err(_) => false,
        }
    }
}

/// Where the reader stands in the request stream.
enum State {
    Head,
    Body(u64),
    Chunked(ChunkReader),
    /// Nothing more is read: a head was refused, or a body's framing broke.
    Done,
}

pub struct FramedIo {
    stream: Arc<TcpStream>,
    shared: Arc<IoState>,
    state: State,
    /// Bytes read and not yet passed on (a head being gathered).
    input: Vec<u8>,
    /// How much of `input` has been searched for the head's end.
    scanned: usize,
    /// Bytes for hyper, from `out_at`.
    out: Vec<u8>,
    out_at: usize,
    /// The socket reached EOF.
    eof: bool,
    scratch: Vec<u8>,
}

/// Whether `buf[from..]` (with 3 bytes of overlap) holds an empty line, the end of a head.
fn has_head_end(buf: &[u8], from: usize) -> bool {
    let from = from.saturating_sub(3);
    buf[from..].windows(2).any(|w| w == b"\n\n") || buf[from..].windows(3).any(|w| w == b"\n\r\n")
}

impl FramedIo {
    pub fn new(stream: Arc<TcpStream>, shared: Arc<IoState>) -> FramedIo {
        shared.between_requests.store(true, Ordering::SeqCst);
        FramedIo {
            stream,
            shared,
            state: State::Head,
            input: Vec::new(),
            scanned: 0,
            out: Vec::new(),
            out_at: 0,
            eof: false,
            scratch: vec![0; 16 * 1024],
        }
    }

    /// Classifies `data`: complete heads (or their refusals) and body bytes go to `out`.
    fn feed(&mut self, data: &[u8]) {
        if matches!(self.state, State::Done) {
            return;
        }
        self.input.extend_from_slice(data);
        let mut at = 0;
        while at < self.input.len() {
            let rest = &self.input[at..];
            match &mut self.state {
                State::Done => break,
                State::Body(n) => {
                    let k = (*n).min(rest.len() as u64) as usize;
                    self.out.extend_from_slice(&rest[..k]);
                    at += k;
                    *n -= k as u64;
                    if *n == 0 {
                        self.state = State::Head;
                    }
                }
                State::Chunked(reader) => match reader.advance(rest) {
                    Step::More => {
                        self.out.extend_from_slice(rest);
                        at = self.input.len();
                    }
                    Step::End(k) => {
                        self.out.extend_from_slice(&rest[..k]);
                        at += k;
                        self.state = State::Head;
                    }
                    Step::Broken(k) => {
                        // hyper fails on the same byte and answers 400 (routes.rs): pass it on, stop.
                        self.out.extend_from_slice(&rest[..=k]);
                        self.state = State::Done;
                    }
                },
                State::Head => {
                    if !has_head_end(rest, self.scanned) && rest.len() <= MAX_HEAD {
                        self.scanned = rest.len();
                        break;
                    }
                    match framing::parse_head(rest) {
                        Head::Partial => {
                            self.scanned = rest.len();
                            break;
                        }
                        Head::Complete { len, body, minor } => {
                            self.shared.http10.store(minor == 0, Ordering::SeqCst);
                            self.out.extend_from_slice(&rest[..len]);
                            at += len;
                            self.scanned = 0;
                            self.state = match body {
                                Body::Length(0) => State::Head,
                                Body::Length(n) => State::Body(n),
                                Body::Chunked => State::Chunked(ChunkReader::default()),
                            };
                        }
                        Head::Refused(why) => {
                            self.out.extend_from_slice(&why.synthetic_head());
                            self.state = State::Done;
                        }
                    }
                }
            }
        }
        if matches!(self.state, State::Done) {
            self.input = Vec::new();
        } else {
            self.input.drain(..at);
        }
        let between = matches!(self.state, State::Head) && self.input.is_empty();
        if between && !self.shared.between_requests.swap(true, Ordering::SeqCst) {
            self.shared.progress.notify_one();
        } else if !between {
            self.shared.between_requests.store(false, Ordering::SeqCst);
        }
    }

    /// Writes what the probe left unwritten, before anything else.
    fn poll_pending(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut pending = self.shared.pending.lock().unwrap_or_else(|p| p.into_inner());
        while !pending.is_empty() {
            ready!(self.stream.poll_write_ready(cx))?;
            match self.stream.try_write(&pending) {
                Ok(n) => {
                    pending.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for FramedIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.out_at < this.out.len() {
                let n = (this.out.len() - this.out_at).min(buf.remaining());
                buf.put_slice(&this.out[this.out_at..this.out_at + n]);
                this.out_at += n;
                if this.out_at == this.out.len() {
                    this.out.clear();
                    this.out_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof || matches!(this.state, State::Done) {
                return Poll::Ready(Ok(())); // EOF for hyper
            }
            ready!(this.stream.poll_read_ready(cx))?;
            let mut scratch = std::mem::take(&mut this.scratch);
            let read = this.stream.try_read(&mut scratch);
            match read {
                Ok(0) => {
                    this.eof = true;
                    this.input.clear(); // half a head is no request
                    this.shared.read_closed.store(true, Ordering::SeqCst);
                    this.shared.closed.notify_one();
                }
                Ok(n) => this.feed(&scratch[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    this.scratch = scratch;
                    return Poll::Ready(Err(e));
                }
            }
            this.scratch = scratch;
        }
    }
}

impl AsyncWrite for FramedIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        loop {
            ready!(self.stream.poll_write_ready(cx))?;
            match self.stream.try_write(data) {
                Ok(n) => {
                    if n > 0 {
                        self.shared.writing.store(true, Ordering::SeqCst);
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        self.shared.writing.store(false, Ordering::SeqCst);
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        let _ = socket2::SockRef::from(&*self.stream).shutdown(Shutdown::Write);
        Poll::Ready(Ok(()))
    }
}
