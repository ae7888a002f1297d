//! tei-host against hostile clients (issue 49), on loopback, each test bounded in time: the table
//! of cases.rs (each request with the statuses it must get), and the failures of the issue's table
//! as scenarios: request smuggling, half-closed clients, the rerank template, abandoning clients
//! and the live queue gauge, a small request behind a maximal one, `dimensions` and `model`, size
//! flags that overflow, running out of descriptors, SIGTERM with open connections, killed
//! tokenizer workers. Text goes through the host's real worker pool on the byte tokenizer of stub/.
mod cases;
#[path = "../common/mod.rs"]
mod common;
mod process;
mod wire;

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{metric, post, start, vectors};
use serde_json::json;
use tei_host::Config;
use wire::{exchange, post_json, End};

/// The byte tokenizer's files: the Python that finds it, and its tokenizer.json.
pub fn stub_python() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hostile/python.sh").display().to_string()
}

pub fn stub_tokenizer() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hostile/stub/tokenizer.json")
}

fn with_tokenizer(c: &mut Config) {
    c.python = stub_python();
    c.tokenizer = Some(stub_tokenizer());
    c.tokenization_workers = 2;
}

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn every_case_gets_its_status() {
    let s = start(|c| {
        with_tokenizer(c);
        c.payload_limit = 200_000;
        c.read_timeout = Duration::from_millis(1500);
        c.max_client_batch_tokens = Some(8192);
    });
    let addr = s.addr;
    let cases = Arc::new(Mutex::new(cases::all().into_iter().enumerate().collect::<Vec<_>>()));
    let total = cases.lock().unwrap().len();
    let wrong = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (cases, wrong) = (Arc::clone(&cases), Arc::clone(&wrong));
            thread::spawn(move || loop {
                let Some((i, c)) = cases.lock().unwrap().pop() else { return };
                let x = wire::exchange_paced(
                    addr,
                    &[&c.raw],
                    Duration::ZERO,
                    c.half_close,
                    c.want.len().max(1),
                    c.head_only,
                    LIMIT,
                );
                let got = x.statuses();
                // Whatever came, the server ends the exchange: no reset, nothing left hanging
                // where no more answers are due.
                let hung = c.want.is_empty() && x.end == End::Open;
                if got != c.want || x.end == End::Reset || hung {
                    let first = x.answers.first().map(|a| String::from_utf8_lossy(&a.body).into_owned());
                    wrong.lock().unwrap().push(format!(
                        "case {i} '{}': want {:?}, got {got:?} ({:?} after {:?}) {}",
                        c.name,
                        c.want,
                        x.end,
                        x.took,
                        first.unwrap_or_default()
                    ));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let wrong = wrong.lock().unwrap();
    println!("{total} hostile cases in {:?}, {} wrong", started.elapsed(), wrong.len());
    assert!(total >= 150, "only {total} cases");
    assert!(wrong.is_empty(), "{} of {total} cases wrong:\n{}", wrong.len(), wrong.join("\n"));
    // Still serving, nothing left queued.
    assert_eq!(post(addr, "/embed", &json!({ "inputs": "still here" })).status, 200);
    assert_eq!(metric(addr, "te_queue_size "), 0.0);
    s.shutdown().unwrap();
}

#[test]
fn smuggling_is_refused_and_the_connection_closed() {
    let s = start(|_| {});
    let body = r#"{"inputs": [1, 2, 3]}"#;
    for order in
        ["Content-Length: 40\r\nTransfer-Encoding: chunked", "Transfer-Encoding: chunked\r\nContent-Length: 40"]
    {
        let raw = format!(
            "POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n{order}\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\nGET /nosuch HTTP/1.1\r\nHost: t\r\n\r\n",
            body.len()
        );
        let x = exchange(s.addr, raw.as_bytes(), false, 2, LIMIT);
        assert_eq!(x.statuses(), [400], "{order}: the hidden request was answered");
        assert_eq!(x.end, End::Closed, "{order}");
        let a = &x.answers[0];
        assert_eq!(a.header("connection"), Some("close"));
        let message = a.json()["error"].as_str().unwrap().to_string();
        assert!(message.contains("Content-Length and Transfer-Encoding"), "{message}");
    }
    // A malformed chunk is 400, and closes too.
    let raw =
        "POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    let x = exchange(s.addr, raw.as_bytes(), false, 2, LIMIT);
    assert_eq!((x.statuses(), x.end), (vec![400], End::Closed));
    assert_eq!(x.answers[0].json()["error_type"], "bad_request");
    s.shutdown().unwrap();
}

#[test]
fn half_closed_clients_get_their_answer() {
    let s = start(|c| c.batch_pause = Duration::from_millis(300)); // the client's EOF comes while it waits
    let want = vectors(&post(s.addr, "/embed", &json!({ "inputs": [[4, 5, 6]] })).json());
    for (path, body) in [
        ("/embed", json!({ "inputs": [[4, 5, 6]] })),
        ("/rerank", json!({ "query": [4, 5], "texts": [[6], [7]] })),
        ("/v1/embeddings", json!({ "input": [[4, 5, 6]] })),
    ] {
        let raw = post_json(path, body.to_string().as_bytes());
        let x = exchange(s.addr, &raw, true, 1, LIMIT);
        assert_eq!(x.statuses(), [200], "{path}: {x:?}");
        assert_eq!(x.interim, 1, "{path}: the half-closed client was not probed");
        if path == "/embed" {
            assert_eq!(vectors(&x.answers[0].json()), want);
        }
    }
    // HTTP/1.0 gets no interim answer (RFC 9110 15.2), and its answer all the same.
    let body = json!({ "inputs": [[4, 5, 6]] }).to_string();
    let raw = format!(
        "POST /embed HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let x = exchange(s.addr, raw.as_bytes(), true, 1, LIMIT);
    assert_eq!((x.statuses(), x.interim), (vec![200], 0));
    s.shutdown().unwrap();
}

#[test]
fn the_rerank_template_is_filled_once() {
    let s = start(|c| {
        with_tokenizer(c);
        c.rerank_template = "{query}\n{text}".into();
    });
    let score = |body: serde_json::Value| {
        let r = post(s.addr, "/rerank", &body);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.json()[0]["score"].as_f64().unwrap()
    };
    let ids = |t: &str| t.bytes().map(|b| b as u32 + 3).collect::<Vec<u32>>();
    let templated = score(json!({ "query": "{text}", "texts": ["passage"], "raw_scores": true }));
    // The same prompt as ids: the query's literal text, the newline, the passage.
    let literal = score(json!({ "query": ids("{text}\n"), "texts": [ids("passage")], "raw_scores": true }));
    let two_pass = score(json!({ "query": ids("passage\n"), "texts": [ids("passage")], "raw_scores": true }));
    assert_eq!(templated, literal, "the query's text was not kept as it is");
    assert_ne!(templated, two_pass, "the query's {{text}} was filled with the passage");
    let other_way = score(json!({ "query": "q", "texts": ["{query}"], "raw_scores": true }));
    assert_eq!(other_way, score(json!({ "query": ids("q\n"), "texts": [ids("{query}")], "raw_scores": true })));
    s.shutdown().unwrap();
}

#[test]
fn dimensions_shorten_and_renormalise_and_the_model_is_the_served_one() {
    let s = start(|_| {});
    let a = s.addr;
    let raw = vectors(&post(a, "/embed", &json!({ "inputs": [[7, 8, 9]], "normalize": false })).json()).remove(0);
    let first: Vec<f32> = raw[..16].to_vec();
    let norm = first.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt();
    let want: Vec<f32> = first.iter().map(|&x| x * (1.0 / norm) as f32).collect();
    let r = post(a, "/v1/embeddings", &json!({ "input": [[7, 8, 9]], "dimensions": 16, "model": "qwen3_tiny" }));
    assert_eq!(r.status, 200);
    let got: Vec<f32> =
        r.json()["data"][0]["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    assert_eq!(got, want);
    assert_eq!(r.json()["model"], "qwen3_tiny");
    let short =
        vectors(&post(a, "/embed", &json!({ "inputs": [[7, 8, 9]], "dimensions": 16, "normalize": false })).json());
    assert_eq!(short[0], first);
    let too_many = post(a, "/v1/embeddings", &json!({ "input": [[7]], "dimensions": 65 }));
    assert_eq!((too_many.status, too_many.json()["type"].as_str()), (422, Some("validation")));
    let other = post(a, "/v1/embeddings", &json!({ "input": [[7]], "model": "gpt-4" }));
    assert_eq!((other.status, other.json()["type"].as_str()), (404, Some("model_not_found")));
    assert!(other.json()["message"].as_str().unwrap().contains("qwen3_tiny"));
    // No suggestion of a `truncate` the OpenAI route does not have.
    let long = post(a, "/v1/embeddings", &json!({ "input": [vec![1; 600]] }));
    assert_eq!(long.status, 413);
    assert!(!long.json()["message"].as_str().unwrap().contains("truncate"), "{}", long.json());
    s.shutdown().unwrap();
}

#[test]
fn abandoned_work_is_dropped_and_the_queue_gauge_is_live() {
    // Batches that take 2 s: the work queues behind them; a queue that 16 abandoned requests
    // would fill.
    let s = start(|c| {
        c.batch_pause = Duration::from_secs(2);
        c.max_batch_tokens = 512;
        c.max_queued_tokens = 16 * 32 * 100;
        c.max_client_batch_tokens = Some(32 * 100);
    });
    let a = s.addr;
    let long = thread::spawn(move || post(a, "/embed", &json!({ "inputs": vec![vec![9u32; 400]; 4] })));
    let started = Instant::now();
    while metric(a, "te_batch_inference_count") < 1.0 && started.elapsed() < LIMIT {
        thread::sleep(Duration::from_millis(5));
    }
    let mut gone = Vec::new();
    for i in 0..16u32 {
        let body = json!({ "inputs": vec![vec![i + 1; 100]; 32] }).to_string();
        let raw = post_json("/embed", body.as_bytes());
        let mut c = TcpStream::connect(a).unwrap();
        if i % 4 == 0 {
            // The body's end comes after the route has started: watched for EOF all the same.
            let (head, tail) = raw.split_at(raw.len() - 100);
            wire::send(&mut c, head);
            thread::sleep(Duration::from_millis(50));
            wire::send(&mut c, tail);
        } else {
            wire::send(&mut c, &raw);
        }
        gone.push(c);
    }
    // While they wait, the gauge shows their sequences.
    let started = Instant::now();
    while metric(a, "te_queue_size ") < 16.0 * 32.0 && started.elapsed() < LIMIT {
        thread::sleep(Duration::from_millis(5));
    }
    assert!(metric(a, "te_queue_size ") >= 16.0 * 32.0, "the gauge did not show the queued work");
    for c in &gone {
        let _ = c.shutdown(Shutdown::Both);
    }
    drop(gone);
    // The gauge drops as soon as the clients are found gone, not when the batch ends.
    let started = Instant::now();
    while metric(a, "te_queue_size ") > 4.0 && started.elapsed() < LIMIT {
        thread::sleep(Duration::from_millis(5));
    }
    assert!(metric(a, "te_queue_size ") <= 4.0, "dead clients' work still counted");
    // A live request now is not refused for the dead ones' tokens.
    let r = post(a, "/embed", &json!({ "inputs": vec![vec![3u32; 100]; 32] }));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(long.join().unwrap().status, 200);
    let ran = metric(a, "te_batch_next_size_sum");
    assert!(ran <= 4.0 + 32.0 + 8.0, "abandoned sequences ran: {ran} sequences in batches");
    assert_eq!(metric(a, "te_queue_size "), 0.0);
    s.shutdown().unwrap();
}

#[test]
fn a_small_request_behind_a_maximal_one_waits_two_batches_at_most() {
    // Sequences of a whole batch's 256 tokens (or, under a row bound, 256 compact rows: there the
    // batcher holds about one batch, not --max-batch-tokens), sharing nothing: one per batch, 8
    // batches of 300 ms or more for the big request, no room left beside one of them for the small
    // one.
    use radix_mlp::BatchMode::{Fifo, Prefix};
    for (mode, rows) in [(Fifo, None), (Prefix, None), (Prefix, Some(256))] {
        let s = start(|c| {
            c.batch_pause = Duration::from_millis(300);
            c.max_batch_tokens = if rows.is_some() { 1024 } else { 256 };
            c.max_batch_rows = rows;
            c.max_client_batch_tokens = Some(8 * 256);
            c.batch_mode = mode;
        });
        let a = s.addr;
        let inputs: Vec<Vec<u32>> = (0..8).map(|i| vec![5 + i; 256]).collect();
        let big = thread::spawn(move || post(a, "/embed", &json!({ "inputs": inputs })));
        let started = Instant::now();
        while metric(a, "te_batch_inference_count") < 1.0 && started.elapsed() < LIMIT {
            thread::sleep(Duration::from_millis(2));
        }
        let before = metric(a, "te_batch_inference_count");
        let r = post(a, "/embed", &json!({ "inputs": [[1, 2, 3]] }));
        let after = metric(a, "te_batch_inference_count");
        assert_eq!(r.status, 200);
        let what = format!("{mode:?}, max_batch_rows {rows:?}");
        assert!(after - before <= 2.0, "{what}: the small request waited {} batches (from {before})", after - before);
        assert!(!big.is_finished(), "{what}: the big request ended before the small one: nothing was tested");
        assert_eq!(big.join().unwrap().status, 200);
        // The cap: a request past --max-client-batch-tokens is refused by name.
        let r = post(a, "/embed", &json!({ "inputs": vec![vec![5u32; 256]; 9] }));
        assert_eq!(r.status, 413);
        assert!(r.json()["error"].as_str().unwrap().contains("--max-client-batch-tokens 2048"));
        s.shutdown().unwrap();
    }
}

#[test]
fn size_flags_that_overflow_are_refused_by_name() {
    for (flag, value) in
        [("--cache-mb", "17592186044416"), ("--port", "70000"), ("--max-batch-tokens", "18446744073709551616")]
    {
        let out = process::run_to_end(&["--model", "m", flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag) && err.contains(value), "{flag} {value}: {err}");
    }
}

#[test]
fn out_of_descriptors_the_server_still_answers_health() {
    let host = process::Host::start_limited(64, &[]);
    // 80 idle connections with 64 descriptors: the oldest idle ones are closed to make room.
    let idle: Vec<TcpStream> = (0..80).filter_map(|_| TcpStream::connect(host.addr).ok()).collect();
    thread::sleep(Duration::from_millis(300));
    let cpu = host.cpu_seconds();
    for _ in 0..5 {
        let x = exchange(host.addr, &wire::request("GET", "/health", &[], b""), false, 1, Duration::from_secs(5));
        assert_eq!(x.statuses(), [200], "/health with {} connections held", idle.len());
    }
    thread::sleep(Duration::from_secs(1));
    let spent = host.cpu_seconds() - cpu;
    assert!(spent < 0.5, "the server spent {spent:.2} s of CPU in about 1 s with idle connections: spinning");
    drop(idle);
    drop(host);
    // --max-connections: the connection idle the longest goes first.
    let host = process::Host::start(&["--max-connections", "3"]);
    let mut held: Vec<TcpStream> = Vec::new();
    for _ in 0..3 {
        held.push(TcpStream::connect(host.addr).unwrap());
        thread::sleep(Duration::from_millis(50));
    }
    let x = exchange(host.addr, &wire::request("GET", "/health", &[], b""), false, 1, Duration::from_secs(5));
    assert_eq!(x.statuses(), [200]);
    held[0].set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(std::io::Read::read(&mut held[0], &mut [0u8; 1]).unwrap_or(1), 0, "the oldest idle connection is open");
    held[2].set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    assert!(std::io::Read::read(&mut held[2], &mut [0u8; 1]).is_err(), "a newer idle connection was closed");
}

#[test]
fn after_sigterm_open_connections_get_503_and_close() {
    let host = process::Host::start(&["--shutdown-grace-ms", "5000"]);
    let addr: SocketAddr = host.addr;
    let keep = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut open: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for c in &mut open {
        wire::send(c, keep("/health").as_bytes());
        assert_eq!(process::read_answer(c).status, 200);
    }
    host.signal("TERM");
    thread::sleep(Duration::from_millis(300));
    for c in &mut open {
        wire::send(c, keep("/info").as_bytes());
        let a = process::read_answer(c);
        assert_eq!(a.status, 503, "{}", String::from_utf8_lossy(&a.body));
        assert_eq!(a.header("connection"), Some("close"));
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(std::io::Read::read(c, &mut [0u8; 1]).unwrap(), 0, "closed after the 503");
    }
    assert_eq!(host.wait(Duration::from_secs(20)), Some(0));
}

#[test]
fn killed_tokenizer_workers_are_replaced() {
    let host =
        process::Host::start(&["--python", &stub_python(), "--tokenizer", &stub_tokenizer().display().to_string()]);
    let body = json!({ "inputs": ["killed workers", "come back"] });
    assert_eq!(post(host.addr, "/embed", &body).status, 200);
    let killed = host.kill_children();
    assert!(killed >= 1, "no tokenizer worker to kill");
    for _ in 0..4 {
        assert_eq!(post(host.addr, "/embed", &body).status, 200);
    }
}

#[test]
fn a_tokenization_whose_client_went_away_is_not_run() {
    use std::sync::atomic::AtomicBool;
    use tei_host::tokenizer::{TokenizeError, TokenizerPool};
    let pool = TokenizerPool::start(&stub_python(), &stub_tokenizer(), 1).unwrap();
    assert_eq!(pool.encode(&["ab"], &AtomicBool::new(false)), Ok(vec![vec![b'a' as u32 + 3, b'b' as u32 + 3]]));
    assert_eq!(pool.encode(&["ab"], &AtomicBool::new(true)), Err(TokenizeError::Cancelled));
}
