//! A raw HTTP/1.1 client for the hostile cases: sends any bytes on a fresh connection (then, if
//! asked, shuts its sending side), reads the answers that come (interim 1xx counted apart) until
//! enough came, the server closed, or a time limit passed, and says how the connection ended.
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// How an exchange ended.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum End {
    /// The server closed the connection (EOF).
    Closed,
    /// The server reset it.
    Reset,
    /// Still open when we stopped reading (enough answers, or the time limit).
    Open,
}

#[derive(Debug)]
pub struct Exchange {
    pub answers: Vec<Answer>,
    /// Interim (1xx) answers seen before them.
    pub interim: usize,
    pub end: End,
    pub took: Duration,
}

impl Exchange {
    pub fn statuses(&self) -> Vec<u16> {
        self.answers.iter().map(|a| a.status).collect()
    }
}

/// Parses the answers at the start of `raw`; `head_only` answers (to HEAD) have no body.
pub fn parse(raw: &[u8], head_only: bool) -> (Vec<Answer>, usize) {
    let (mut answers, mut interim, mut at) = (Vec::new(), 0, 0);
    while let Some(end) = raw[at..].windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&raw[at..at + end]).into_owned();
        let mut lines = head.split("\r\n");
        let Some(status) = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse::<u16>().ok()) else {
            break;
        };
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let body_at = at + end + 4;
        if (100..200).contains(&status) {
            interim += 1;
            at = body_at;
            continue;
        }
        let length = if head_only {
            0
        } else {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .unwrap_or(0)
        };
        if raw.len() < body_at + length {
            break;
        }
        answers.push(Answer { status, headers, body: raw[body_at..body_at + length].to_vec() });
        at = body_at + length;
    }
    (answers, interim)
}

/// Sends `raw` (in `pieces` writes `pause` apart), half-closes when asked, and reads until `want`
/// answers came, the connection ended, or `limit` passed.
pub fn exchange_paced(
    addr: SocketAddr,
    pieces: &[&[u8]],
    pause: Duration,
    half_close: bool,
    want: usize,
    head_only: bool,
    limit: Duration,
) -> Exchange {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect");
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(pause);
        }
        if s.write_all(piece).is_err() {
            break; // the server closed early: read what it said
        }
    }
    if half_close {
        let _ = s.shutdown(Shutdown::Write);
    }
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let end = loop {
        if parse(&raw, head_only).0.len() >= want {
            break End::Open;
        }
        let left = limit.saturating_sub(start.elapsed());
        if left.is_zero() {
            break End::Open;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => break End::Closed,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                break End::Open
            }
            Err(_) => break End::Reset,
        }
    };
    let (answers, interim) = parse(&raw, head_only);
    Exchange { answers, interim, end, took: start.elapsed() }
}

pub fn exchange(addr: SocketAddr, raw: &[u8], half_close: bool, want: usize, limit: Duration) -> Exchange {
    exchange_paced(addr, &[raw], Duration::ZERO, half_close, want, false, limit)
}

/// A request: `Host`, the headers given, `Content-Length` of the body (when it has one or the
/// method is POST), `Connection: close`.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        raw.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    raw.push_str("Connection: close\r\n\r\n");
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    raw
}

/// A JSON POST.
pub fn post_json(path: &str, body: &[u8]) -> Vec<u8> {
    request("POST", path, &[("Content-Type", "application/json")], body)
}

/// A chunked JSON POST of `chunks` (the last, empty chunk added).
pub fn post_chunked(path: &str, chunks: &[&[u8]]) -> Vec<u8> {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for c in chunks {
        raw.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        raw.extend_from_slice(c);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    raw
}

/// Writes to `s`, ignoring a closed peer.
pub fn send(s: &mut TcpStream, raw: &[u8]) {
    let _ = s.write_all(raw);
}
