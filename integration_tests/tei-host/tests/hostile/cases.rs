//! The hostile cases sent one per connection, each with the statuses it must get (in order; an
//! empty list: no answer, the connection closed), against the qwen3_tiny fixture with the byte
//! tokenizer of stub/ (ids = UTF-8 bytes + 3), `--payload-limit 200000`, `--max-input-length`
//! the fixture's 512 positions, `--max-client-batch-size 32`, `--max-client-batch-tokens 8192`.
//! Grouped: framing and the request line, headers and HTTP's rules, routes and methods, bodies
//! and JSON, each route's fields.
use crate::wire::{post_chunked, post_json, request};

pub struct Case {
    pub name: String,
    pub raw: Vec<u8>,
    /// Shut the sending side after the request.
    pub half_close: bool,
    pub want: Vec<u16>,
    /// The answers are to HEAD requests (no bodies).
    pub head_only: bool,
}

fn case(name: impl Into<String>, raw: impl Into<Vec<u8>>, want: &[u16]) -> Case {
    Case { name: name.into(), raw: raw.into(), half_close: false, want: want.to_vec(), head_only: false }
}

fn half_closed(name: &str, raw: impl Into<Vec<u8>>, want: &[u16]) -> Case {
    Case { half_close: true, ..case(name, raw, want) }
}

fn embed(name: &str, body: &str, want: u16) -> Case {
    case(format!("/embed {name}"), post_json("/embed", body.as_bytes()), &[want])
}

fn rerank(name: &str, body: &str, want: u16) -> Case {
    case(format!("/rerank {name}"), post_json("/rerank", body.as_bytes()), &[want])
}

fn openai(name: &str, body: &str, want: u16) -> Case {
    case(format!("/v1/embeddings {name}"), post_json("/v1/embeddings", body.as_bytes()), &[want])
}

fn raw(name: &str, text: &str, want: &[u16]) -> Case {
    case(name, text.as_bytes(), want)
}

const E: &str = "POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n";

fn framing() -> Vec<Case> {
    let body = r#"{"inputs": [1, 2, 3]}"#;
    let n = body.len();
    let chunked = |chunks: &str| format!("{E}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{chunks}");
    vec![
        raw(
            "CL and TE, a request smuggled behind the chunked end",
            &format!(
                "{E}Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\nGET /nosuch HTTP/1.1\r\nHost: t\r\n\r\n",
                n + 10,
                n
            ),
            &[400],
        ),
        raw(
            "TE then CL (hyper drops the CL header)",
            &format!("{E}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n{n:x}\r\n{body}\r\n0\r\n\r\n"),
            &[400],
        ),
        raw("CL and TE in other case", &format!("{E}content-length: {n}\r\ntransfer-encoding: CHUNKED\r\n\r\n{body}"), &[400]),
        raw("TE gzip, chunked", &format!("{E}Transfer-Encoding: gzip, chunked\r\n\r\n"), &[501]),
        raw("TE identity", &format!("{E}Transfer-Encoding: identity\r\nConnection: close\r\n\r\n{body}"), &[501]),
        raw("TE chunked twice", &format!("{E}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), &[501]),
        raw("TE empty", &format!("{E}Transfer-Encoding:\r\n\r\n"), &[501]),
        raw("TE on HTTP/1.0", "POST /embed HTTP/1.0\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", &[400]),
        raw("two different Content-Lengths", &format!("{E}Content-Length: {n}\r\nContent-Length: 5\r\n\r\n{body}"), &[400]),
        raw("two equal Content-Lengths", &format!("{E}Content-Length: {n}\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n{body}"), &[200]),
        raw("Content-Length +5", &format!("{E}Content-Length: +5\r\n\r\n{body}"), &[400]),
        raw("Content-Length -1", &format!("{E}Content-Length: -1\r\n\r\n"), &[400]),
        raw("Content-Length abc", &format!("{E}Content-Length: abc\r\n\r\n"), &[400]),
        raw("Content-Length 5, 5", &format!("{E}Content-Length: 5, 5\r\n\r\n"), &[400]),
        raw("Content-Length 0x10", &format!("{E}Content-Length: 0x10\r\n\r\n"), &[400]),
        raw("Content-Length past u64", &format!("{E}Content-Length: 99999999999999999999\r\n\r\n"), &[400]),
        raw("Content-Length empty", &format!("{E}Content-Length:\r\n\r\n"), &[400]),
        raw("chunked, valid, in pieces", &chunked("5\r\n{\"inp\r\n10\r\nuts\": [1, 2, 3]}\r\n0\r\n\r\n"), &[200]),
        raw("chunked with extensions and trailers", &chunked(&format!("{n:x};a=b\r\n{body}\r\n0\r\nX-T: 1\r\n\r\n")), &[200]),
        raw("chunk size not hex", &chunked("zz\r\n{}\r\n0\r\n\r\n"), &[400]),
        raw("chunk data longer than its size", &chunked("2\r\n{\"inputs\": [1]}\r\n0\r\n\r\n"), &[400]),
        raw("chunk extension with a bare LF", &chunked("5;a\nb\r\n12345\r\n0\r\n\r\n"), &[400]),
        raw("chunk size overflowing u64", &chunked("fffffffffffffffffff\r\n{}\r\n0\r\n\r\n"), &[400]),
        raw("chunk size with a space inside", &chunked("1 2\r\n{}\r\n0\r\n\r\n"), &[400]),
        raw("chunk without its CRLF", &chunked(&format!("{n:x}\r\n{body}0\r\n\r\n")), &[400]),
        raw("negative chunk size", &chunked("-5\r\n{}\r\n0\r\n\r\n"), &[400]),
        half_closed("chunked body cut off, half-closed", chunked("100\r\n{\"inputs\"").into_bytes(), &[400]),
        half_closed("Content-Length body cut off, half-closed", format!("{E}Content-Length: 100\r\n\r\n{{\"inputs\": [1"), &[400]),
        raw("body longer than Content-Length: the rest is a bad request", &format!("{E}Content-Length: {n}\r\n\r\n{body}garbage\r\n\r\n"), &[200, 400]),
        raw("request line garbage", "HELLO\r\n\r\n", &[400]),
        raw("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", &[505]),
        raw("HTTP/1.2", "GET /health HTTP/1.2\r\nHost: t\r\n\r\n", &[505]),
        raw("HTTP/0.9 style", "GET /health\r\n\r\n", &[400]),
        case("TLS client hello", &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03abcdefgh\r\n\r\n"[..], &[400]),
        raw("a NUL in the request line", "GET /hea\0lth HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        raw("a space in the target", "GET /he alth HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        raw("a header without a colon", "GET /health HTTP/1.1\r\nHost: t\r\nNoColon\r\n\r\n", &[400]),
        raw("a space in a header name", "GET /health HTTP/1.1\r\nHost: t\r\nX Y: z\r\n\r\n", &[400]),
        raw("a space before the colon", "GET /health HTTP/1.1\r\nHost : t\r\n\r\n", &[400]),
        raw("an obs-fold continuation", "GET /health HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", &[400]),
        raw("a NUL in a header value", "GET /health HTTP/1.1\r\nHost: t\r\nX-A: a\0b\r\n\r\n", &[400]),
        case("obs-text in a header value", &b"GET /health HTTP/1.1\r\nHost: t\r\nX-A: \xe9t\xe9\r\nConnection: close\r\n\r\n"[..], &[200]),
        raw("LF-only line ends", "GET /health HTTP/1.1\nHost: t\nConnection: close\n\n", &[200]),
        raw("leading empty lines", "\r\n\r\nGET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &[200]),
        case("a head of 200 KB", format!("GET /health HTTP/1.1\r\nHost: t\r\nX-A: {}\r\n\r\n", "a".repeat(200_000)), &[431]),
        case("a target of 70 KB", format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(70_000)), &[414]),
        case("101 headers", format!("GET /health HTTP/1.1\r\nHost: t\r\n{}\r\n", (0..101).map(|i| format!("X-{i}: a\r\n")).collect::<String>()), &[431]),
        case("99 headers", format!("GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{}\r\n", (0..97).map(|i| format!("X-{i}: a\r\n")).collect::<String>()), &[200]),
        raw("no Host on HTTP/1.1", "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", &[400]),
        raw("two Hosts", "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &[400]),
        raw("HTTP/1.0 without Host", "GET /health HTTP/1.0\r\n\r\n", &[200]),
        raw("the reserved header", "GET /health HTTP/1.1\r\nHost: t\r\nX-Tei-Host-Refused: cl-te\r\n\r\n", &[400]),
        raw("nothing but empty lines", "\r\n\r\n\r\n", &[]),
        half_closed("half a head, half-closed", "GET /health HTTP/1.1\r\nHo", &[]),
        half_closed("nothing, half-closed", "", &[]),
    ]
}

fn http_rules() -> Vec<Case> {
    let body = br#"{"inputs": [1, 2, 3]}"#;
    let with = |headers: &[(&str, &str)]| request("POST", "/embed", headers, body);
    vec![
        case("Content-Type text/plain", with(&[("Content-Type", "text/plain")]), &[415]),
        case("no Content-Type", with(&[]), &[415]),
        case("Content-Type form", with(&[("Content-Type", "application/x-www-form-urlencoded")]), &[415]),
        case("Content-Type multipart", with(&[("Content-Type", "multipart/form-data; boundary=x")]), &[415]),
        case("Content-Type json with charset", with(&[("Content-Type", "application/json; charset=utf-8")]), &[200]),
        case("Content-Type in capitals", with(&[("Content-Type", "APPLICATION/JSON")]), &[200]),
        case("Content-Type +json", with(&[("Content-Type", "application/vnd.api+json")]), &[200]),
        case("Content-Type json, no body", request("POST", "/embed", &[("Content-Type", "application/json")], b""), &[422]),
        case("Expect: foo", with(&[("Content-Type", "application/json"), ("Expect", "foo")]), &[417]),
        case("Expect: 100-continue", with(&[("Content-Type", "application/json"), ("Expect", "100-continue")]), &[200]),
        case("Expect: 100-Continue", with(&[("Content-Type", "application/json"), ("Expect", "100-Continue")]), &[200]),
        case("Expect on GET", request("GET", "/health", &[("Expect", "something")], b""), &[417]),
        Case { head_only: true, ..case("HEAD /health", request("HEAD", "/health", &[], b""), &[200]) },
        Case { head_only: true, ..case("HEAD /info", request("HEAD", "/info", &[], b""), &[200]) },
        Case { head_only: true, ..case("HEAD /metrics", request("HEAD", "/metrics", &[], b""), &[200]) },
        Case { head_only: true, ..case("HEAD /embed", request("HEAD", "/embed", &[], b""), &[405]) },
        case("OPTIONS preflight", request("OPTIONS", "/embed", &[("Origin", "https://a.example"), ("Access-Control-Request-Method", "POST")], b""), &[200]),
        case("OPTIONS without Origin", request("OPTIONS", "/rerank", &[], b""), &[200]),
        case("OPTIONS *", request("OPTIONS", "*", &[], b""), &[200]),
        case("OPTIONS on no route", request("OPTIONS", "/nosuch", &[], b""), &[200]),
        case("GET with an Origin", request("GET", "/health", &[("Origin", "https://evil.example")], b""), &[200]),
        raw("pipelined GETs", "GET /health HTTP/1.1\r\nHost: t\r\n\r\nGET /info HTTP/1.1\r\nHost: t\r\n\r\nGET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &[200, 200, 200]),
        raw("pipelined POST and GET", &format!("{E}Content-Length: 15\r\n\r\n{{\"inputs\": [5]}}GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"), &[200, 200]),
        raw("pipelined, a smuggling one in the middle", &format!("GET /health HTTP/1.1\r\nHost: t\r\n\r\n{E}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: t\r\n\r\n"), &[200, 400]),
        raw("pipelined, a 404 then a 200", "GET /nosuch HTTP/1.1\r\nHost: t\r\n\r\nGET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &[404, 200]),
        raw("HTTP/1.0 keeps no connection", "GET /health HTTP/1.0\r\n\r\nGET /health HTTP/1.0\r\n\r\n", &[200]),
        raw("absolute-form target", "GET http://t/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &[200]),
        raw("CONNECT", "CONNECT t:443 HTTP/1.1\r\nHost: t:443\r\nConnection: close\r\n\r\n", &[404]),
        raw("an unknown method", "FROB /embed HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &[405]),
        raw("a lower-case method", "get /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &[405]),
        raw("TRACE", "TRACE /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &[405]),
        raw("DELETE /info", "DELETE /info HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &[405]),
        raw("PUT /embed", "PUT /embed HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", &[405]),
        raw("Connection: Upgrade to websocket", "GET /health HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n\r\n", &[200]),
        raw("Connection: close, keep-alive", "GET /health HTTP/1.1\r\nHost: t\r\nConnection: keep-alive, close\r\n\r\n", &[200]),
        half_closed("a complete request, then half-closed", post_json("/embed", br#"{"inputs": [1, 2, 3]}"#), &[200]),
        half_closed("a GET, then half-closed", "GET /health HTTP/1.1\r\nHost: t\r\n\r\n", &[200]),
    ]
}

fn routes() -> Vec<Case> {
    let get = |path: &str, want: u16| case(format!("GET {path}"), request("GET", path, &[], b""), &[want]);
    vec![
        get("/health", 200),
        get("/info", 200),
        get("/metrics", 200),
        get("/health?x=1&y", 200),
        get("/nosuch", 404),
        get("/embed", 405),
        get("/rerank", 405),
        get("/v1/embeddings", 405),
        get("/embed/", 404),
        get("//health", 404),
        get("/HEALTH", 404),
        get("/%68ealth", 404),
        get("/../health", 404),
        get("/health/../info", 404),
        get("/v1/embeddings/x", 404),
        case("POST /health", post_json("/health", b"{}"), &[405]),
        case("POST /metrics", post_json("/metrics", b"{}"), &[405]),
        case("POST /", post_json("/", br#"{"inputs": [1]}"#), &[200]),
        case("POST /invocations", post_json("/invocations", br#"{"inputs": [1]}"#), &[200]),
        case("POST /nosuch", post_json("/nosuch", br#"{"inputs": [1]}"#), &[404]),
    ]
}

fn json_bodies() -> Vec<Case> {
    let deep = format!("{{\"inputs\": {}1{}}}", "[".repeat(10_000), "]".repeat(10_000));
    let padded = format!("{}{{\"inputs\": [1]}}{}", " ".repeat(90_000), "\n".repeat(90_000));
    let many_keys = format!("{{{} \"inputs\": [1]}}", (0..5000).map(|i| format!("\"k{i}\": {i},")).collect::<String>());
    let mut cases = vec![
        embed("empty body", "", 422),
        embed("{", "{", 422),
        embed("[", "[", 422),
        embed("nul", "nul", 422),
        embed("a missing value", r#"{"inputs": }"#, 422),
        embed("a trailing comma", r#"{"inputs": [1, 2,]}"#, 422),
        embed("single quotes", "{'inputs': [1]}", 422),
        embed("NaN", r#"{"inputs": [NaN]}"#, 422),
        embed("Infinity", r#"{"inputs": [Infinity]}"#, 422),
        embed("a comment", r#"{"inputs": [1] /* x */}"#, 422),
        embed("a byte order mark", "\u{feff}{\"inputs\": [1]}", 422),
        embed("a lone surrogate escape", r#"{"inputs": "\ud800"}"#, 422),
        embed("an unknown escape", r#"{"inputs": "\q"}"#, 422),
        embed("a raw control character in a string", "{\"inputs\": \"a\u{1}b\"}", 422),
        embed("two JSON values", r#"{"inputs": [1]}{"inputs": [2]}"#, 422),
        embed("a duplicate key (the last wins)", r#"{"inputs": [], "inputs": [1]}"#, 200),
        embed("the body a list", "[1, 2]", 422),
        embed("the body a number", "5", 422),
        embed("the body a text", "\"inputs\"", 422),
        embed("the body null", "null", 422),
        embed("the body true", "true", 422),
        embed("10,000 nested lists", &deep, 422),
        embed("170 KB of whitespace around it", &padded, 200),
        embed("5,000 unknown keys", &many_keys, 200),
        embed("unknown fields", r#"{"inputs": [1], "frobnicate": {"a": [1, 2]}}"#, 200),
        case("/embed invalid UTF-8", post_json("/embed", b"{\"inputs\": \"\xff\xfe\"}"), &[422]),
        case("/embed a body over the payload limit", post_json("/embed", format!("{{\"inputs\": [{}1]}}", "1,".repeat(110_000)).as_bytes()), &[413]),
        case("/embed chunked past the payload limit", post_chunked("/embed", &[&[b'1'; 150_000], &[b'1'; 150_000]]), &[413]),
        case("/embed chunked, 1,000 one-byte chunks", post_chunked("/embed", &br#"{"inputs": [1, 2, 3]}"#.iter().map(std::slice::from_ref).chain(std::iter::repeat(&b" "[..]).take(980)).collect::<Vec<_>>()), &[200]),
    ];
    cases.push(case(
        "/embed Content-Length 100 MB declared",
        format!("{E}Content-Length: 100000000\r\n\r\n{{").into_bytes(),
        &[413],
    ));
    cases
}

fn embed_fields() -> Vec<Case> {
    let text = |t: &str| serde_json::json!({ "inputs": t }).to_string();
    vec![
        embed("inputs null", r#"{"inputs": null}"#, 422),
        embed("inputs missing", r#"{"input": [1]}"#, 422),
        embed("inputs a number", r#"{"inputs": 5}"#, 422),
        embed("inputs an object", r#"{"inputs": {"a": 1}}"#, 422),
        embed("inputs true", r#"{"inputs": true}"#, 422),
        embed("inputs []", r#"{"inputs": []}"#, 400),
        embed("inputs [[]]", r#"{"inputs": [[]]}"#, 422),
        embed("inputs [[1], []]", r#"{"inputs": [[1], []]}"#, 422),
        embed("a fractional id", r#"{"inputs": [1.5]}"#, 422),
        embed("a negative id", r#"{"inputs": [-1]}"#, 422),
        embed("an id as 1e3", r#"{"inputs": [1e3]}"#, 422),
        embed("an id of 2^32", r#"{"inputs": [4294967296]}"#, 422),
        embed("an id of 1e400", r#"{"inputs": [1e400]}"#, 422),
        embed("an id of 2^64", r#"{"inputs": [18446744073709551616]}"#, 422),
        embed("an id past the vocabulary", r#"{"inputs": [1000]}"#, 422),
        embed("the last id of the vocabulary", r#"{"inputs": [999]}"#, 200),
        embed("id 0", r#"{"inputs": [0]}"#, 200),
        embed("an id true", r#"{"inputs": [true]}"#, 422),
        embed("an id null", r#"{"inputs": [null]}"#, 422),
        embed("a text among ids", r#"{"inputs": [[1], [2, "a"]]}"#, 422),
        embed("lists three deep", r#"{"inputs": [[[1]]]}"#, 422),
        embed("a text and ids", r#"{"inputs": ["a", [1]]}"#, 200),
        embed("an empty text", r#"{"inputs": ""}"#, 422),
        embed("a text", &text("hello world"), 200),
        embed("accents", &text("héllo wörld, ça va"), 200),
        embed("emoji and joiners", &text("👩‍👩‍👧‍👦 🏳️‍🌈 e\u{301}"), 200),
        embed("right-to-left and zero-width", &text("\u{202e}abc\u{200b}\u{feff}שלום"), 200),
        embed("a NUL in a text", &text("a\u{0}b"), 200),
        embed("escapes of surrogate pairs", r#"{"inputs": "\ud83d\ude00"}"#, 200),
        embed("a text of 600 bytes", &text(&"é".repeat(300)), 413),
        embed(
            "a text of 600 bytes, truncated",
            &serde_json::json!({ "inputs": "é".repeat(300), "truncate": true }).to_string(),
            200,
        ),
        embed("32 inputs", &serde_json::json!({ "inputs": vec![[1]; 32] }).to_string(), 200),
        embed("33 inputs", &serde_json::json!({ "inputs": vec![[1]; 33] }).to_string(), 413),
        embed(
            "32 x 300 tokens, past --max-client-batch-tokens",
            &serde_json::json!({ "inputs": vec![vec![7; 300]; 32] }).to_string(),
            413,
        ),
        embed("513 ids", &serde_json::json!({ "inputs": vec![1; 513] }).to_string(), 413),
        embed(
            "513 ids, truncated left",
            &serde_json::json!({ "inputs": vec![1; 513], "truncate": true, "truncation_direction": "left" })
                .to_string(),
            200,
        ),
        embed("normalize \"yes\"", r#"{"inputs": [1], "normalize": "yes"}"#, 422),
        embed("normalize null", r#"{"inputs": [1], "normalize": null}"#, 200),
        embed("normalize false", r#"{"inputs": [1], "normalize": false}"#, 200),
        embed("truncate 1", r#"{"inputs": [1], "truncate": 1}"#, 422),
        embed("truncation_direction up", r#"{"inputs": [1], "truncation_direction": "up"}"#, 422),
        embed("truncation_direction 5", r#"{"inputs": [1], "truncation_direction": 5}"#, 422),
        embed("truncation_direction right", r#"{"inputs": [1], "truncation_direction": "right"}"#, 200),
        embed("dimensions 0", r#"{"inputs": [1], "dimensions": 0}"#, 422),
        embed("dimensions -1", r#"{"inputs": [1], "dimensions": -1}"#, 422),
        embed("dimensions 1.5", r#"{"inputs": [1], "dimensions": 1.5}"#, 422),
        embed("dimensions \"8\"", r#"{"inputs": [1], "dimensions": "8"}"#, 422),
        embed("dimensions 65", r#"{"inputs": [1], "dimensions": 65}"#, 422),
        embed("dimensions 1e30", r#"{"inputs": [1], "dimensions": 1e30}"#, 422),
        embed("dimensions 64", r#"{"inputs": [1], "dimensions": 64}"#, 200),
        embed("dimensions 1", r#"{"inputs": [1], "dimensions": 1}"#, 200),
    ]
}

fn rerank_fields() -> Vec<Case> {
    vec![
        rerank("ids", r#"{"query": [3, 4], "texts": [[5], [6, 7]]}"#, 200),
        rerank("texts", r#"{"query": "what", "texts": ["a", "b c"]}"#, 200),
        rerank("query {text}", r#"{"query": "{text}", "texts": ["{query}"]}"#, 200),
        rerank("return_text", r#"{"query": "q", "texts": ["a"], "return_text": true}"#, 200),
        rerank("query missing", r#"{"texts": ["a"]}"#, 422),
        rerank("texts missing", r#"{"query": "q"}"#, 422),
        rerank("texts []", r#"{"query": "q", "texts": []}"#, 400),
        rerank("texts a text", r#"{"query": "q", "texts": "a"}"#, 422),
        rerank("texts null", r#"{"query": "q", "texts": null}"#, 422),
        rerank("query a number", r#"{"query": 5, "texts": ["a"]}"#, 422),
        rerank("query null", r#"{"query": null, "texts": ["a"]}"#, 422),
        rerank("a text a number", r#"{"query": "q", "texts": ["a", 5]}"#, 422),
        rerank("query ids past the vocabulary", r#"{"query": [1000], "texts": [[1]]}"#, 422),
        rerank("query [] and a text of ids", r#"{"query": [], "texts": [[1]]}"#, 200),
        rerank("empty query and text", r#"{"query": "", "texts": [""]}"#, 200),
        rerank("33 texts", &serde_json::json!({ "query": "q", "texts": vec!["a"; 33] }).to_string(), 413),
        rerank(
            "a prompt of 600 bytes",
            &serde_json::json!({ "query": "q", "texts": ["é".repeat(300)] }).to_string(),
            413,
        ),
        rerank("raw_scores \"x\"", r#"{"query": "q", "texts": ["a"], "raw_scores": "x"}"#, 422),
        rerank("return_text 1", r#"{"query": "q", "texts": ["a"], "return_text": 1}"#, 422),
        rerank("the body a list", r#"[{"query": "q", "texts": ["a"]}]"#, 422),
    ]
}

fn openai_fields() -> Vec<Case> {
    vec![
        openai("the served model", r#"{"input": "x", "model": "qwen3_tiny"}"#, 200),
        openai("no model", r#"{"input": "x"}"#, 200),
        openai("model null", r#"{"input": "x", "model": null}"#, 200),
        openai("model gpt-4", r#"{"input": "x", "model": "gpt-4"}"#, 404),
        openai("model empty", r#"{"input": "x", "model": ""}"#, 404),
        openai("model 5", r#"{"input": "x", "model": 5}"#, 422),
        openai("encoding_format hex", r#"{"input": "x", "encoding_format": "hex"}"#, 422),
        openai("encoding_format base64", r#"{"input": "x", "encoding_format": "base64"}"#, 200),
        openai("dimensions 16", r#"{"input": "x", "dimensions": 16}"#, 200),
        openai("dimensions 65", r#"{"input": "x", "dimensions": 65}"#, 422),
        openai("dimensions 0", r#"{"input": "x", "dimensions": 0}"#, 422),
        openai("input []", r#"{"input": []}"#, 400),
        openai("input missing", r#"{"inputs": ["x"]}"#, 422),
        openai("input \"\"", r#"{"input": ""}"#, 422),
        openai("input token ids", r#"{"input": [[1, 2], [3]]}"#, 200),
        openai("33 inputs", &serde_json::json!({ "input": vec!["x"; 33] }).to_string(), 413),
        openai("an input of 600 bytes", &serde_json::json!({ "input": "é".repeat(300) }).to_string(), 413),
        openai("not JSON", "input=x", 422),
    ]
}

/// Every case.
pub fn all() -> Vec<Case> {
    [framing(), http_rules(), routes(), json_bodies(), embed_fields(), rerank_fields(), openai_fields()]
        .into_iter()
        .flatten()
        .collect()
}
