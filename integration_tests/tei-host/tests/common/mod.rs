//! What the tests share: a server on a committed fixture model (port 0, in this process), and an
//! HTTP/1.1 client on a plain TcpStream, so a test can also send what no well-behaved client sends
//! (half a body, a lying Content-Length, a body one byte at a time).
#![allow(dead_code)]
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use radix_mlp::{Gate, PlanParams};
use serde_json::Value;
use tei_host::{Config, Server};

pub const RADIX_ON: PlanParams = PlanParams { threshold: 1.0, pad_multiple_of: None, gate: Gate::Distinct };
pub const RADIX_OFF: PlanParams = PlanParams { threshold: 0.0, pad_multiple_of: None, gate: Gate::Distinct };

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(name)
}

/// qwen3_tiny (vocab 1000, hidden 64, an LM head) with tokens 1 and 2 as the rerank pair, port 0,
/// a 64 MB prefix cache; `edit` changes what a test needs.
pub fn config(edit: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::new(fixture("qwen3_tiny")).unwrap();
    c.port = 0;
    c.score_tokens = Some((1, 2));
    c.max_batch_tokens = 2048;
    c.plan = RADIX_ON;
    edit(&mut c);
    c
}

/// A server, loaded.
pub fn start(edit: impl FnOnce(&mut Config)) -> Server {
    let mut s = Server::start(config(edit), false).unwrap();
    s.wait_ready(Duration::from_secs(30)).unwrap();
    s
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn error_type(&self) -> String {
        self.json()["error_type"].as_str().unwrap_or("").to_string()
    }
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Reads one response (Connection: close, so to the end of the stream).
pub fn read_reply(mut s: TcpStream) -> Reply {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_reply(&raw).unwrap_or_else(|| panic!("no HTTP response in {:?}", String::from_utf8_lossy(&raw)))
}

pub fn parse_reply(raw: &[u8]) -> Option<Reply> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines.filter_map(|l| l.split_once(": ")).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Some(Reply { status, headers, body: raw[end + 4..].to_vec() })
}

/// One request on its own connection.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
    let mut s = connect(addr);
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    read_reply(s)
}

pub fn post(addr: SocketAddr, path: &str, body: &Value) -> Reply {
    request(addr, "POST", path, &body.to_string())
}

pub fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, "")
}

/// The JSON array of arrays of floats.
pub fn vectors(v: &Value) -> Vec<Vec<f32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
        .collect()
}

pub fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-6);
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max) / scale
}

/// A value of a metric line (`name{labels} value`) in /metrics, 0 when absent.
pub fn metric(addr: SocketAddr, line_start: &str) -> f64 {
    let text = String::from_utf8(get(addr, "/metrics").body).unwrap();
    text.lines().find(|l| l.starts_with(line_start)).and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0.0)
}

/// Token sequences sharing a prefix: `n` rerank-like prompts.
pub fn shared_prefix_sequences(n: usize) -> Vec<Vec<u32>> {
    (0..n)
        .map(|i| [vec![11, 12, 13, 14, 15, 16, 17, 18], vec![100 + i as u32, 200 + (i as u32 * 7) % 300]].concat())
        .collect()
}
