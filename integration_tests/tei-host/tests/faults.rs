//! Faults, each bounded in time: clients that disconnect mid-body or while queued, slowloris
//! headers and bodies, a lying Content-Length, a chunked body past the limit, a 10,000-passage rerank
//! (413 by default, answered whole when allowed), and 10x overload: every request gets its answer or
//! a 429, the answers are right, and the process's memory does not grow round after round.
mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

fn send(addr: SocketAddr, raw: &[u8]) -> std::net::TcpStream {
    let mut s = connect(addr);
    s.write_all(raw).unwrap();
    s
}

/// The server still answers, and its queue is empty.
fn still_serving(addr: SocketAddr) {
    let r = post(addr, "/embed", &json!({ "inputs": [1, 2, 3] }));
    assert_eq!(r.status, 200);
    assert_eq!(metric(addr, "te_queue_size "), 0.0);
}

#[test]
fn disconnects_mid_body_and_while_queued() {
    let s = start(|c| c.attention = tei_host::AttentionMode::Host); // slow batches: requests wait
    let a = s.addr;
    // Half a body, then gone.
    let half = send(a, b"POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"inputs\": [1,");
    drop(half);
    // Whole requests whose clients leave before the answer (queued behind a long one).
    let long = thread::spawn(move || post(a, "/embed", &json!({ "inputs": vec![vec![9u32; 400]; 8] })));
    thread::sleep(Duration::from_millis(50));
    for i in 0..20 {
        let body = json!({ "inputs": vec![vec![i as u32 + 1; 300]; 4] }).to_string();
        let raw = format!(
            "POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        drop(send(a, raw.as_bytes()));
    }
    assert_eq!(long.join().unwrap().status, 200);
    // Their sequences leave the queue unrun: the backend does not compute 80 abandoned sequences.
    let start = Instant::now();
    while metric(a, "te_queue_size ") > 0.0 && start.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(20));
    }
    still_serving(a);
    let ran = metric(a, "te_batch_next_size_sum") - 1.0; // less still_serving's
    println!("sequences run: {ran} (8 asked for, 80 abandoned)");
    assert!(ran <= 8.0 + 8.0, "abandoned sequences ran: {ran} sequences in batches");
    s.shutdown().unwrap();
}

#[test]
fn slow_headers_and_bodies_time_out() {
    let s = start(|c| c.read_timeout = Duration::from_millis(400));
    let a = s.addr;
    // Slowloris headers: one byte at a time, never finished: closed by the header timeout.
    let mut slow = connect(a);
    let start = Instant::now();
    let mut closed = false;
    for b in b"POST /embed HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
        if slow.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        thread::sleep(Duration::from_millis(30));
    }
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(
        closed && start.elapsed() < Duration::from_secs(2),
        "slow headers kept the connection {:?}",
        start.elapsed()
    );
    // A slow body: headers at once, the body never completes: 408 within the timeout.
    let start = Instant::now();
    let s2 = send(
        a,
        b"POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"inp",
    );
    let r = read_reply(s2);
    assert_eq!((r.status, r.error_type().as_str()), (408, "timeout"));
    assert!(start.elapsed() < Duration::from_secs(3), "408 after {:?}", start.elapsed());
    // Many at once do not block other clients.
    let held: Vec<_> = (0..50)
        .map(|_| {
            send(a, b"POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{")
        })
        .collect();
    still_serving(a);
    drop(held);
    s.shutdown().unwrap();
}

#[test]
fn oversized_bodies_are_413() {
    let s = start(|c| c.payload_limit = 1000);
    let a = s.addr;
    // Declared too large: refused before reading.
    let r = read_reply(send(
        a,
        b"POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n",
    ));
    assert_eq!((r.status, r.error_type().as_str()), (413, "validation"));
    assert_eq!(r.header("connection"), Some("close"));
    // Chunked, past the limit while reading.
    let mut raw =
        b"POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for _ in 0..3 {
        raw.extend_from_slice(format!("190\r\n{}\r\n", "1".repeat(400)).as_bytes());
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(read_reply(send(a, &raw)).status, 413);
    // A Content-Length larger than the body sent: the read times out (408), nothing hangs.
    still_serving(a);
    s.shutdown().unwrap();
}

/// The overload test reads this process's RSS: the 10,000-passage test, which allocates hundreds
/// of MB, does not run beside it.
static MEMORY: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn ten_thousand_passage_rerank() {
    let _alone = MEMORY.lock().unwrap_or_else(|p| p.into_inner());
    let query: Vec<u32> = (10..40).collect();
    let texts: Vec<Vec<u32>> = (0..10_000u32).map(|i| vec![100 + i % 800, 1 + i % 13, 2 + i % 17]).collect();
    let body = json!({ "query": query, "texts": texts });
    // The default limit: 413 at once.
    let s = start(|_| {});
    let start_t = Instant::now();
    let r = post(s.addr, "/rerank", &body);
    assert_eq!((r.status, r.error_type().as_str()), (413, "validation"));
    assert!(r.json()["error"].as_str().unwrap().contains("batch size 10000 > maximum allowed batch size 32"));
    assert!(start_t.elapsed() < Duration::from_secs(5));
    s.shutdown().unwrap();
    // Allowed: every passage ranked once, shared query computed once per batch.
    let s = start(|c| {
        c.max_client_batch_size = 10_000;
        c.max_client_batch_tokens = Some(400_000);
        c.payload_limit = 10_000_000;
        c.max_batch_tokens = 16384;
    });
    let start_t = Instant::now();
    let r = post(s.addr, "/rerank", &body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let ranks = r.json();
    let mut seen: Vec<u64> = ranks.as_array().unwrap().iter().map(|x| x["index"].as_u64().unwrap()).collect();
    seen.sort();
    assert!(seen.iter().copied().eq(0..10_000));
    let ratio_sum = metric(s.addr, "te_radix_mlp_compression_ratio_sum");
    let batches = metric(s.addr, "te_radix_mlp_compression_ratio_count");
    assert!(ratio_sum / batches < 0.2, "the query was not shared: compact/tokens {}", ratio_sum / batches);
    println!("10k-passage rerank: {:?}, {batches} batches", start_t.elapsed());
    assert!(start_t.elapsed() < Duration::from_secs(120));
    s.shutdown().unwrap();
}

/// Resident memory of this process in MB.
fn rss_mb() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm.split(' ').nth(1).unwrap().parse::<f64>().unwrap() * 4096.0 / 1e6
}

#[test]
fn ten_times_overload_gives_429_and_bounded_memory() {
    let _alone = MEMORY.lock().unwrap_or_else(|p| p.into_inner());
    const LIMIT: usize = 4;
    let s = start(|c| {
        c.max_concurrent_requests = LIMIT;
        c.attention = tei_host::AttentionMode::Host; // slower batches: the limit is reached
    });
    let a = s.addr;
    let want = vectors(&post(a, "/embed", &json!({ "inputs": [[3, 1, 4, 1, 5]] })).json());
    let mut rss = Vec::new();
    for round in 0..4 {
        let clients: Vec<_> = (0..LIMIT * 10)
            .map(|_| {
                thread::spawn(move || {
                    (0..5)
                        .map(|_| post(a, "/embed", &json!({ "inputs": [[3, 1, 4, 1, 5], vec![7; 100]] })))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let (mut ok, mut busy) = (0, 0);
        for c in clients {
            for r in c.join().unwrap() {
                match r.status {
                    200 => {
                        ok += 1;
                        let d = max_rel_diff(&vectors(&r.json())[0], &want[0]);
                        assert!(d < 1e-4, "an answer under load differs by {d} (batching changes only rounding)");
                    }
                    429 => {
                        busy += 1;
                        assert_eq!(r.error_type(), "overloaded");
                    }
                    other => panic!("status {other} under overload: {}", String::from_utf8_lossy(&r.body)),
                }
            }
        }
        assert_eq!(ok + busy, LIMIT * 10 * 5);
        assert!(ok > 0 && busy > 0, "round {round}: {ok} answered, {busy} refused");
        rss.push(rss_mb());
        println!("round {round}: {ok} answered, {busy} x 429, RSS {:.1} MB", rss[round]);
    }
    assert!(rss[3] - rss[1] < 20.0, "memory grew under overload: {rss:?} MB");
    still_serving(a);
    s.shutdown().unwrap();
}
