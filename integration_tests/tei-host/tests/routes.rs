//! The routes as a client sees them, on the qwen3_tiny fixture: TEI's JSON shapes and headers, the
//! outputs equal to the library's own forward of each sequence alone (radix on and off, the
//! library's attention and the host's), the status codes (400, 413, 422, 424, 429, 503, 404, 405),
//! truncation, metrics, and a graceful shutdown that answers every request in flight.
mod common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use radix_mlp::{Model, Planner, Pooling};
use serde_json::json;
use tei_host::{AttentionMode, Server};

/// Each sequence alone through the library (no radix, no cache): last-token pooled states and
/// the (1, 2) rerank scores.
fn reference(seqs: &[Vec<u32>]) -> (Vec<Vec<f32>>, Vec<radix_mlp::PairScore>) {
    let model = Model::load(fixture("qwen3_tiny")).unwrap();
    let mut ctx = model.context(2048).unwrap();
    let mut planner = Planner::new().unwrap();
    let (mut pooled, mut scores) = (Vec::new(), Vec::new());
    for s in seqs {
        let pos: Vec<u32> = (0..s.len() as u32).collect();
        let cu = [0, s.len() as u32];
        let plan = planner.build(s, &pos, &cu, &RADIX_OFF).unwrap();
        let mut hidden = vec![0.0; s.len() * model.config().hidden_size];
        ctx.forward(&plan, &mut hidden).unwrap();
        pooled.push(model.pool(&hidden, &cu, Pooling::Last, false).unwrap());
        scores.push(ctx.score_pair(&hidden, &cu, 1, 2).unwrap()[0]);
    }
    (pooled, scores)
}

#[test]
fn outputs_equal_the_library_radix_on_and_off_both_attentions() {
    let seqs = shared_prefix_sequences(6);
    let (want, want_scores) = reference(&seqs);
    for (plan, attention, max_batch_rows) in [
        (RADIX_ON, AttentionMode::Library, None),
        (RADIX_OFF, AttentionMode::Library, None),
        (RADIX_ON, AttentionMode::Host, None),
        (RADIX_OFF, AttentionMode::Host, None),
        (RADIX_ON, AttentionMode::Library, Some(12)), // 10 + 2 rows a batch: three batches a call
    ] {
        let s = start(|c| {
            c.plan = plan;
            c.attention = attention;
            c.max_batch_rows = max_batch_rows;
        });
        let what = format!("threshold {} {attention:?} max_batch_rows {max_batch_rows:?}", plan.threshold);
        let info = get(s.addr, "/info").json();
        assert_eq!(info["radix_mlp"]["max_batch_rows"].as_u64(), max_batch_rows.map(|n| n as u64), "{what}");
        // Twice: the second time the library's prefix cache holds every row.
        for round in 0..2 {
            let r = post(s.addr, "/embed", &json!({ "inputs": seqs, "normalize": false }));
            assert_eq!(r.status, 200, "{what}");
            for (got, want) in vectors(&r.json()).iter().zip(&want) {
                let d = max_rel_diff(got, want);
                assert!(d <= 1e-5, "{what} round {round}: embedding differs from the library's by {d}");
            }
        }
        let texts: Vec<Vec<u32>> = seqs.iter().map(|q| q[8..].to_vec()).collect();
        let r = post(s.addr, "/rerank", &json!({ "query": seqs[0][..8], "texts": texts, "raw_scores": true }));
        assert_eq!(r.status, 200, "{what}");
        for rank in r.json().as_array().unwrap() {
            let (i, got) = (rank["index"].as_u64().unwrap() as usize, rank["score"].as_f64().unwrap() as f32);
            let want = want_scores[i].logit_a - want_scores[i].logit_b;
            assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "{what}: raw score {i}: {got} vs {want}");
        }
        let radix = metric(s.addr, "te_radix_mlp_batches{gate=\"radix\"}");
        assert_eq!(radix > 0.0, plan.threshold > 0.5, "{what}: radix batches {radix}");
        if max_batch_rows.is_some() {
            assert!(radix >= 9.0, "{what}: {radix} batches for three calls of 20 rows (at least 3 each)");
        }
        if attention == AttentionMode::Library && plan.threshold > 0.5 {
            assert!(metric(s.addr, "te_radix_mlp_cache_hit_tokens") > 0.0, "{what}: the cache never hit");
        }
        s.shutdown().unwrap();
    }
}

#[test]
fn tei_shapes() {
    let s = start(|_| {});
    let a = s.addr;
    // /embed: one vector per input, unit length by default.
    let r = post(a, "/embed", &json!({ "inputs": [5, 6, 7] }));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    for h in ["x-compute-time", "x-compute-tokens", "x-queue-time", "x-inference-time", "x-tokenization-time"] {
        assert!(r.header(h).is_some(), "header {h}");
    }
    assert_eq!(r.header("x-compute-tokens"), Some("3"));
    let v = vectors(&r.json());
    assert_eq!((v.len(), v[0].len()), (1, 64));
    let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    let raw = vectors(&post(a, "/embed", &json!({ "inputs": [[5, 6, 7], [8]], "normalize": false })).json());
    assert_eq!(raw.len(), 2);
    assert!(
        max_rel_diff(
            &raw[0].iter().map(|x| x / raw[0].iter().map(|y| y * y).sum::<f32>().sqrt()).collect::<Vec<_>>(),
            &v[0]
        ) < 1e-5
    );
    // / and /invocations are /embed.
    assert_eq!(vectors(&post(a, "/", &json!({ "inputs": [5, 6, 7] })).json()), v);
    assert_eq!(vectors(&post(a, "/invocations", &json!({ "inputs": [5, 6, 7] })).json()), v);
    // /rerank: sorted by score, probabilities, index and no text for ids.
    let r = post(a, "/rerank", &json!({ "query": [3, 4], "texts": [[5], [6, 7], [8, 9, 10]], "return_text": true }));
    assert_eq!(r.status, 200);
    let ranks = r.json();
    let ranks = ranks.as_array().unwrap();
    assert_eq!(ranks.len(), 3);
    let scores: Vec<f64> = ranks.iter().map(|x| x["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]) && scores.iter().all(|&p| (0.0..=1.0).contains(&p)));
    let mut idx: Vec<u64> = ranks.iter().map(|x| x["index"].as_u64().unwrap()).collect();
    idx.sort();
    assert_eq!(idx, [0, 1, 2]);
    assert!(ranks.iter().all(|x| x.get("text").is_none()));
    let raw = post(a, "/rerank", &json!({ "query": [3, 4], "texts": [[5]], "raw_scores": true })).json();
    let sigmoid = 1.0 / (1.0 + (-raw[0]["score"].as_f64().unwrap()).exp());
    let p = ranks.iter().find(|x| x["index"] == 0).unwrap()["score"].as_f64().unwrap();
    assert!((sigmoid - p).abs() < 1e-5, "sigmoid(raw score) {sigmoid} vs score {p}");
    // /v1/embeddings: OpenAI's list, float and base64 the same numbers.
    let f = post(a, "/v1/embeddings", &json!({ "input": [[5, 6, 7], [8]], "model": "qwen3_tiny" })).json();
    assert_eq!((f["object"].as_str(), f["model"].as_str()), (Some("list"), Some("qwen3_tiny")));
    assert_eq!(f["usage"], json!({ "prompt_tokens": 4, "total_tokens": 4 }));
    assert_eq!((f["data"][1]["object"].as_str(), f["data"][1]["index"].as_u64()), (Some("embedding"), Some(1)));
    let floats: Vec<f32> =
        f["data"][0]["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    assert_eq!(floats, v[0]);
    let b = post(a, "/v1/embeddings", &json!({ "input": [5, 6, 7], "encoding_format": "base64" })).json();
    assert_eq!(b["data"][0]["embedding"].as_str().unwrap(), tei_host::types::base64_f32(&v[0]));
    // /info, /health, /metrics.
    let info = get(a, "/info").json();
    assert_eq!(info["model_id"], "qwen3_tiny");
    assert_eq!(info["max_client_batch_size"], 32);
    assert_eq!(info["model_type"]["embedding"]["pooling"], "last");
    assert_eq!(info["radix_mlp"]["score_tokens"], json!([1, 2]));
    assert_eq!(get(a, "/health").status, 200);
    let text = String::from_utf8(get(a, "/metrics").body).unwrap();
    for name in [
        "te_request_count{method=\"single\"}",
        "te_request_success",
        "te_embed_count",
        "te_queue_size",
        "te_batch_next_size_bucket",
        "te_batch_next_tokens_bucket",
        "te_radix_mlp_compression_ratio_bucket{le=\"0.95\"}",
        "te_request_inference_duration_bucket",
    ] {
        assert!(text.contains(name), "/metrics lacks {name}");
    }
    s.shutdown().unwrap();
}

#[test]
fn status_codes() {
    let s = start(|c| {
        c.max_client_batch_size = 4;
        c.max_input_length = Some(600); // past the model's 512 positions: the library refuses (424)
        c.payload_limit = 10_000;
    });
    let a = s.addr;
    let code = |path: &str, body: serde_json::Value| {
        let r = post(a, path, &body);
        (r.status, r.error_type())
    };
    let v = |s: &str| s.to_string();
    assert_eq!(code("/embed", json!({ "inputs": [[1], [2], [3], [4], [5]] })), (413, v("validation")));
    assert_eq!(code("/rerank", json!({ "query": [1], "texts": [[1], [2], [3], [4], [5]] })), (413, v("validation")));
    assert_eq!(code("/embed", json!({ "inputs": vec![1; 601] })), (413, v("validation")));
    assert_eq!(code("/embed", json!({ "inputs": [] })), (400, v("empty")));
    assert_eq!(code("/rerank", json!({ "query": [1], "texts": [] })), (400, v("empty")));
    assert_eq!(code("/embed", json!({ "inputs": [[1], []] })), (422, v("validation")));
    assert_eq!(code("/embed", json!({ "inputs": [1, 1000] })), (422, v("validation")));
    assert_eq!(code("/embed", json!({ "inputs": [1, -1] })), (422, v("validation")));
    assert_eq!(code("/embed", json!({ "inputs": "text" })), (422, v("validation"))); // no tokenizer
    assert_eq!(code("/embed", json!({ "inputs": [1], "normalize": 3 })), (422, v("validation")));
    assert_eq!(code("/embed", json!({ "input": [1] })), (422, v("validation")));
    assert_eq!(code("/rerank", json!({ "texts": [[1]] })), (422, v("validation")));
    assert_eq!(request(a, "POST", "/embed", "{\"inputs\": [1,").status, 422);
    assert_eq!(request(a, "POST", "/embed", "not json").error_type(), "validation");
    let e = post(a, "/embed", &json!({ "inputs": [[1, 2], [3, 4000]] })).json();
    assert_eq!(e["error"], "inputs[1][1]: token id 4000 >= vocab size 1000");
    // The OpenAI route answers in OpenAI's error shape.
    let e = post(a, "/v1/embeddings", &json!({ "input": [] })).json();
    assert_eq!((e["code"].as_u64(), e["type"].as_str()), (Some(400), Some("empty")));
    // 424: the library refuses a batch (positions past max_position_embeddings); the next one runs.
    let r = post(a, "/embed", &json!({ "inputs": vec![1; 550] }));
    assert_eq!((r.status, r.error_type().as_str()), (424, "backend"), "{:?}", r.json());
    assert!(r.json()["error"].as_str().unwrap().contains("max_position_embeddings"), "{:?}", r.json());
    assert_eq!(post(a, "/embed", &json!({ "inputs": [1, 2] })).status, 200);
    // 413 for a body over the payload limit, read or not.
    let big = json!({ "inputs": vec![1; 6000] }).to_string();
    assert_eq!(request(a, "POST", "/embed", &big).status, 413);
    // 404, 405.
    assert_eq!(get(a, "/nope").status, 404);
    assert_eq!(get(a, "/embed").status, 405);
    assert_eq!(post(a, "/health", &json!({})).status, 405);
    // 429: every permit taken.
    let permits: Vec<_> = (0..512).map(|_| s.state().queue.admit().unwrap()).collect();
    let r = post(a, "/embed", &json!({ "inputs": [1] }));
    assert_eq!((r.status, r.error_type().as_str()), (429, "overloaded"));
    drop(permits);
    assert_eq!(post(a, "/embed", &json!({ "inputs": [1] })).status, 200);
    assert!(metric(a, "te_request_failure{err=\"overloaded\"}") >= 1.0);
    s.shutdown().unwrap();
}

#[test]
fn truncation_keeps_the_start_or_the_end() {
    let s = start(|_| {}); // max_input_length: the model's 512 positions
    let a = s.addr;
    let ids: Vec<u32> = (0..700).map(|i| (i * 7 % 1000) as u32).collect();
    let embed = |body: serde_json::Value| {
        let r = post(a, "/embed", &body);
        assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.header("x-compute-tokens"), Some("512"));
        vectors(&r.json()).remove(0)
    };
    let r = post(a, "/embed", &json!({ "inputs": ids }));
    assert_eq!((r.status, r.error_type().as_str()), (413, "validation"));
    assert!(r.json()["error"].as_str().unwrap().contains("must have less than 512 tokens. Given: 700"));
    assert_eq!(embed(json!({ "inputs": ids, "truncate": true })), embed(json!({ "inputs": ids[..512] })));
    assert_eq!(
        embed(json!({ "inputs": ids, "truncate": true, "truncation_direction": "Left" })),
        embed(json!({ "inputs": ids[188..] }))
    );
    s.shutdown().unwrap();
    let s = start(|c| c.auto_truncate = true);
    assert_eq!(post(s.addr, "/embed", &json!({ "inputs": ids })).status, 200);
    assert_eq!(post(s.addr, "/embed", &json!({ "inputs": ids, "truncate": false })).status, 413);
    s.shutdown().unwrap();
}

#[test]
fn rerank_needs_an_lm_head_or_score_tokens() {
    let s = start(|c| c.score_tokens = None);
    let r = post(s.addr, "/rerank", &json!({ "query": [1], "texts": [[2]] }));
    assert_eq!((r.status, r.error_type().as_str()), (424, "backend"));
    assert!(r.json()["error"].as_str().unwrap().contains("not a re-ranker"));
    s.shutdown().unwrap();
}

#[test]
fn loading_is_503_then_ready() {
    let mut s = Server::start(config(|c| c.load_delay = Duration::from_millis(1500)), false).unwrap();
    let r = get(s.addr, "/health");
    assert_eq!((r.status, r.error_type().as_str()), (503, "unhealthy"));
    assert_eq!(post(s.addr, "/embed", &json!({ "inputs": [1] })).status, 503);
    assert_eq!(get(s.addr, "/info").status, 503);
    assert_eq!(get(s.addr, "/metrics").status, 200);
    s.wait_ready(Duration::from_secs(30)).unwrap();
    assert_eq!(get(s.addr, "/health").status, 200);
    assert_eq!(post(s.addr, "/embed", &json!({ "inputs": [1] })).status, 200);
    s.shutdown().unwrap();
}

#[test]
fn a_model_that_does_not_load_stops_the_server_with_the_reason() {
    let mut s = Server::start(config(|c| c.model = fixture("no_such_model")), false).unwrap();
    let e = s.wait_ready(Duration::from_secs(30)).unwrap_err();
    assert!(e.contains("no_such_model"), "{e}");
}

#[test]
fn graceful_shutdown_answers_every_request_in_flight() {
    // Two requests a batch and a pause before each forward: all 12 are in flight before the first
    // answer however loaded the machine is (with the host's attention alone, a busy machine
    // answered the first before the last had arrived).
    let s = start(|c| {
        c.attention = AttentionMode::Host;
        c.max_batch_tokens = 512;
        c.batch_pause = Duration::from_millis(1000);
    });
    let addr = s.addr;
    let state = Arc::clone(s.state());
    let clients: Vec<_> = (0..12)
        .map(|i| thread::spawn(move || post(addr, "/embed", &json!({ "inputs": vec![vec![i as u32 + 1; 100]; 2] }))))
        .collect();
    let start = Instant::now();
    while state.queue.in_flight() < 12 && start.elapsed() < Duration::from_secs(20) {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(state.queue.in_flight(), 12, "the requests did not all arrive");
    s.shutdown().unwrap();
    for c in clients {
        let r = c.join().unwrap();
        assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
        assert_eq!(vectors(&r.json()).len(), 2);
    }
    // New connections are refused once it has stopped.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

/// The per-batch profile in /metrics (profile.rs): one batch of two sequences sharing two of their
/// three tokens has N = 6 token ids and N' = 4 compact rows, and each stage is observed once
/// (`--profile-batches` also prints the line on stderr).
#[test]
fn batch_profile_metrics() {
    let s = start(|c| c.profile_batches = true);
    let r = post(s.addr, "/embed", &json!({ "inputs": [[3, 4, 5], [3, 4, 6]] }));
    assert_eq!(r.status, 200);
    // The backend observes the profile once it has answered: wait for it.
    let start = Instant::now();
    let text = loop {
        let text = String::from_utf8(get(s.addr, "/metrics").body).unwrap();
        if text.contains("te_radix_mlp_batch_stage_duration_count{stage=\"answer\"} 1") {
            break text;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no profile in /metrics:\n{text}");
        thread::sleep(Duration::from_millis(10));
    };
    let value = |name: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("/metrics lacks {name}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value("te_batch_next_tokens_sum "), 6.0);
    assert_eq!(value("te_radix_mlp_batch_compact_rows_sum "), 4.0);
    for stage in tei_host::profile::STAGES {
        assert_eq!(value(&format!("te_radix_mlp_batch_stage_duration_count{{stage=\"{stage}\"}} ")), 1.0, "{stage}");
    }
    assert!(value("te_radix_mlp_batch_stage_duration_sum{stage=\"forward\"} ") > 0.0);
    s.shutdown().unwrap();
}
