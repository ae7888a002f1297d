//! The HTTP routes, TEI's: `POST /embed` (also `/` and `/invocations`), `POST /rerank`,
//! `POST /v1/embeddings` (OpenAI's shape), `GET /health`, `GET /info`, `GET /metrics` (and HEAD),
//! behind HTTP's rules (protocol.rs) and with CORS (cors.rs) on every answer. A body is
//! read within `--read-timeout-ms` (else 408) and up to `--payload-limit` bytes (else 413, before
//! reading when Content-Length says so), parsed (422), validated (validate.rs), admitted (429 past
//! `--max-concurrent-requests`), queued and awaited. Answers carry TEI's timing headers.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use hyper::body::HttpBody;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Body, Method, Request, Response, StatusCode};
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use crate::errors::{ApiError, ErrorKind};
use crate::queue::{JobOutput, SeqOutput, Task};
use crate::server::State;
use crate::types::{
    base64_f32, EmbedRequest, Embedding, OpenAiEmbedding, OpenAiRequest, OpenAiResponse, OpenAiUsage, Rank,
    RerankRequest,
};
use crate::validate::{self, Prepared, Truncation};
use crate::{cors, protocol};

/// Which error body a route answers with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Tei,
    OpenAi,
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn error_response(state: &State, shape: Shape, e: &ApiError) -> Response<Body> {
    state.metrics.request_failure.with_label_values(&[e.kind.metric_label()]).inc();
    let body = match shape {
        Shape::Tei => e.tei_body(),
        Shape::OpenAi => e.openai_body(),
    };
    let mut r = json_response(e.status(), body.to_string().into_bytes());
    if e.kind.closes() {
        // The rest of the body is not read, or the framing is not to be trusted.
        r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    if e.kind == ErrorKind::MethodNotAllowed {
        r.headers_mut().insert(ALLOW, HeaderValue::from_static(allowed_methods(path_of(&e.message))));
    }
    r
}

const GET_ROUTES: [&str; 3] = ["/health", "/info", "/metrics"];
const POST_ROUTES: [&str; 5] = ["/embed", "/", "/invocations", "/rerank", "/v1/embeddings"];

/// The path a 405's message names (its last word).
fn path_of(message: &str) -> &str {
    message.rsplit(' ').next().unwrap_or("")
}

/// The `Allow` header of a 405.
fn allowed_methods(path: &str) -> &'static str {
    if GET_ROUTES.contains(&path) {
        "GET, HEAD, OPTIONS"
    } else {
        "POST, OPTIONS"
    }
}

/// Every request: HTTP's rules (protocol.rs), then the route, or 404/405; CORS on every answer,
/// and `Connection: close` on every answer once the server is stopping.
pub async fn handle(state: Arc<State>, req: Request<Body>) -> Result<Response<Body>, std::convert::Infallible> {
    let origin = cors::allowed_origin(state.config.cors_allow_origin.as_deref(), req.headers());
    let mut r = match protocol::before_routes(&state, &req) {
        Err(e) => error_response(&state, Shape::Tei, &e),
        Ok(Some(answer)) => answer,
        Ok(None) => route(&state, req).await,
    };
    cors::apply(origin, &mut r);
    if state.stopping.load(Ordering::SeqCst) {
        r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(r)
}

/// The route (HEAD as GET: hyper sends no body), or 404/405.
async fn route(state: &Arc<State>, req: Request<Body>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let get = method == Method::GET || method == Method::HEAD;
    let post = method == Method::POST;
    let (shape, result) = match path.as_str() {
        "/health" if get => (Shape::Tei, health(state)),
        "/info" if get => (Shape::Tei, info(state)),
        "/metrics" if get => (Shape::Tei, Ok(metrics(state))),
        "/embed" | "/" | "/invocations" if post => (Shape::Tei, embed(state, req).await),
        "/rerank" if post => (Shape::Tei, rerank(state, req).await),
        "/v1/embeddings" if post => (Shape::OpenAi, openai(state, req).await),
        p if GET_ROUTES.contains(&p) || POST_ROUTES.contains(&p) => {
            (Shape::Tei, Err(ApiError::new(ErrorKind::MethodNotAllowed, format!("{method} is not allowed on {path}"))))
        }
        _ => (Shape::Tei, Err(ApiError::new(ErrorKind::NotFound, format!("no route {path}")))),
    };
    result.unwrap_or_else(|e| error_response(state, shape, &e))
}

fn ready(state: &State) -> Result<(), ApiError> {
    if state.loaded.get().is_none() {
        return Err(ApiError::new(ErrorKind::Unhealthy, "the model is loading"));
    }
    if !state.backend_alive.load(Ordering::SeqCst) {
        return Err(ApiError::new(ErrorKind::Unhealthy, "the backend stopped"));
    }
    Ok(())
}

fn health(state: &State) -> Result<Response<Body>, ApiError> {
    ready(state)?;
    Ok(Response::new(Body::empty()))
}

fn info(state: &State) -> Result<Response<Body>, ApiError> {
    ready(state)?;
    let info = &state.loaded.get().expect("ready").info;
    Ok(json_response(StatusCode::OK, info.to_string().into_bytes()))
}

fn metrics(state: &State) -> Response<Body> {
    let mut r = Response::new(Body::from(state.metrics.render()));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"));
    r
}

/// The body as JSON (declared so: else 415), within the time and size limits; a body whose framing
/// breaks (a malformed chunk, cut off) is 400.
async fn read_json(state: &State, req: Request<Body>) -> Result<Value, ApiError> {
    protocol::json_content_type(&req)?;
    let limit = state.config.payload_limit;
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(n) = declared.filter(|&n| n > limit as u64) {
        return Err(ApiError::too_large(format!("the body has {n} bytes, more than the payload limit of {limit}")));
    }
    let mut body = req.into_body();
    let read = async {
        let mut buf = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk =
                chunk.map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("cannot read the body: {e}")))?;
            if buf.len() + chunk.len() > limit {
                return Err(ApiError::too_large(format!("the body is larger than the payload limit of {limit} bytes")));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    };
    let timeout = state.config.read_timeout;
    let bytes = tokio::time::timeout(timeout, read).await.map_err(|_| {
        ApiError::new(ErrorKind::Timeout, format!("the body did not arrive within {} ms", timeout.as_millis()))
    })??;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::validation(format!("the body is not valid JSON: {e}")))
}

/// A request that ran: its outputs and the figures of TEI's headers.
struct Served {
    out: JobOutput,
    chars: usize,
    tokens: usize,
    tokenize_ms: f64,
}

/// Queues and awaits `prepared` (admitted: `_permit` is held until the answer); counts the
/// request's metrics.
async fn serve(
    state: &State,
    _permit: OwnedSemaphorePermit,
    prepared: Prepared,
    task: Task,
) -> Result<Served, ApiError> {
    let m = &state.metrics;
    for s in &prepared.sequences {
        m.request_input_length.observe(s.len() as f64);
    }
    m.request_tokenization_duration.observe(prepared.tokenization.as_secs_f64());
    let (chars, tokens, tokenize_ms) = (prepared.chars, prepared.tokens(), prepared.tokenization.as_secs_f64() * 1e3);
    let out = state.queue.run(prepared.sequences, task).await?;
    m.request_queue_duration.observe(out.queue.as_secs_f64());
    m.request_inference_duration.observe(out.inference.as_secs_f64());
    Ok(Served { out, chars, tokens, tokenize_ms })
}

/// The 200 answer with TEI's headers; counts the success.
fn answered(state: &State, method: &str, start: Instant, body: Vec<u8>, s: &Served) -> Response<Body> {
    state.metrics.request_success.with_label_values(&[method]).inc();
    state.metrics.request_duration.observe(start.elapsed().as_secs_f64());
    let mut r = json_response(StatusCode::OK, body);
    let total = start.elapsed().as_secs_f64() * 1e3;
    let h = r.headers_mut();
    let mut set = |k: &'static str, v: String| {
        h.insert(k, HeaderValue::from_str(&v).expect("ascii"));
    };
    set("x-compute-type", "cpu".into());
    set("x-compute-time", format!("{:.0}", total));
    set("x-compute-characters", s.chars.to_string());
    set("x-compute-tokens", s.tokens.to_string());
    set("x-total-time", format!("{:.0}", total));
    set("x-tokenization-time", format!("{:.0}", s.tokenize_ms));
    set("x-queue-time", format!("{:.0}", s.out.queue.as_secs_f64() * 1e3));
    set("x-inference-time", format!("{:.0}", s.out.inference.as_secs_f64() * 1e3));
    r
}

/// 422 for `dimensions` past the model's hidden size (TEI's check, before the request runs).
fn check_dimensions(state: &State, dimensions: Option<usize>) -> Result<(), ApiError> {
    let hidden = state.loaded.get().map_or(usize::MAX, |l| l.hidden_size);
    match dimensions {
        Some(d) if d > hidden => {
            Err(ApiError::validation(format!("`dimensions` {d} is more than the model's {hidden} dimensions")))
        }
        _ => Ok(()),
    }
}

/// The first `dimensions` of `v` (all when None), L2-normalised when `normalize` (TEI's order).
fn shaped(mut v: Vec<f32>, dimensions: Option<usize>, normalize: bool) -> Vec<f32> {
    if let Some(d) = dimensions {
        v.truncate(d);
    }
    if normalize {
        normalized(v)
    } else {
        v
    }
}

/// L2-normalised (in f64, as TEI does it); a zero vector stays zero.
fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt();
    if norm > 0.0 {
        let scale = (1.0 / norm) as f32;
        v.iter_mut().for_each(|x| *x *= scale);
    }
    v
}

fn embeddings(out: &mut JobOutput) -> Vec<Vec<f32>> {
    out.outputs
        .drain(..)
        .map(|o| match o {
            SeqOutput::Embedding(v) => v,
            SeqOutput::Score(_) => unreachable!("an embed job gets embeddings"),
        })
        .collect()
}

fn count(state: &State, n_inputs: usize) -> &'static str {
    let method = if n_inputs == 1 { "single" } else { "batch" };
    state.metrics.request_count.with_label_values(&[method]).inc();
    method
}

/// What the two embedding routes share: counted, admitted, validated, run; the vectors as pooled.
async fn embed_vectors(
    state: &Arc<State>,
    key: &str,
    inputs: Vec<crate::types::Input>,
    t: Truncation,
) -> Result<(&'static str, Vec<Vec<f32>>, Served), ApiError> {
    let method = count(state, inputs.len());
    state.metrics.embed_count.inc();
    let permit = state.queue.admit()?;
    let prepared = validate::embed_inputs(state, key, inputs, t).await?;
    let mut served = serve(state, permit, prepared, Task::Embed).await?;
    let vectors = embeddings(&mut served.out);
    Ok((method, vectors, served))
}

async fn embed(state: &Arc<State>, req: Request<Body>) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    ready(state)?;
    let r = EmbedRequest::parse(&read_json(state, req).await?)?;
    check_dimensions(state, r.dimensions)?;
    let t = Truncation { truncate: r.truncate, direction: r.direction, suggest: true };
    let (method, vectors, served) = embed_vectors(state, "inputs", r.inputs, t).await?;
    let vectors: Vec<Vec<f32>> = vectors.into_iter().map(|v| shaped(v, r.dimensions, r.normalize)).collect();
    let body = serde_json::to_vec(&vectors).expect("floats serialize");
    state.metrics.embed_success.inc();
    Ok(answered(state, method, start, body, &served))
}

async fn rerank(state: &Arc<State>, req: Request<Body>) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    ready(state)?;
    let r = RerankRequest::parse(&read_json(state, req).await?)?;
    let method = count(state, r.texts.len().max(2));
    state.metrics.predict_count.inc();
    let (a, b) = state.loaded.get().expect("ready").score_tokens.ok_or_else(|| {
        ApiError::new(
            ErrorKind::Backend,
            "model is not a re-ranker model: it has no LM head or no score tokens (--score-tokens)",
        )
    })?;
    let permit = state.queue.admit()?;
    let t = Truncation { truncate: r.truncate, direction: r.direction, suggest: true };
    let prepared = validate::rerank_inputs(state, r.query, &r.texts, t).await?;
    let served = serve(state, permit, prepared, Task::Score(a, b)).await?;
    let mut ranks = Vec::with_capacity(served.out.outputs.len());
    for (index, o) in served.out.outputs.iter().enumerate() {
        let SeqOutput::Score(s) = o else { unreachable!("a rerank job gets scores") };
        let score = if r.raw_scores { s.logit_a - s.logit_b } else { s.prob_a };
        if score.is_nan() {
            return Err(ApiError::new(ErrorKind::Backend, format!("texts[{index}]: score is NaN")));
        }
        let text = match (&r.texts[index], r.return_text) {
            (crate::types::Input::Text(t), true) => Some(t.clone()),
            _ => None,
        };
        ranks.push(Rank { index, text, score });
    }
    ranks.sort_by(|x, y| y.score.total_cmp(&x.score).then(x.index.cmp(&y.index)));
    let body = serde_json::to_vec(&ranks).expect("ranks serialize");
    state.metrics.predict_success.inc();
    Ok(answered(state, method, start, body, &served))
}

async fn openai(state: &Arc<State>, req: Request<Body>) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    ready(state)?;
    let r = OpenAiRequest::parse(&read_json(state, req).await?)?;
    let served_model = &state.config.model_id;
    if let Some(m) = r.model.as_ref().filter(|m| *m != served_model) {
        return Err(ApiError::new(
            ErrorKind::ModelNotFound,
            format!("The model `{m}` does not exist: this server serves `{served_model}`"),
        ));
    }
    check_dimensions(state, r.dimensions)?;
    let t = Truncation { truncate: None, direction: Default::default(), suggest: false };
    let (method, vectors, served) = embed_vectors(state, "input", r.inputs, t).await?;
    let tokens = served.tokens;
    let data = vectors
        .into_iter()
        .enumerate()
        .map(|(index, v)| {
            let v = shaped(v, r.dimensions, true);
            let embedding = if r.base64 { Embedding::Base64(base64_f32(&v)) } else { Embedding::Float(v) };
            OpenAiEmbedding { object: "embedding", embedding, index }
        })
        .collect();
    let response = OpenAiResponse {
        object: "list",
        data,
        model: served_model.clone(),
        usage: OpenAiUsage { prompt_tokens: tokens, total_tokens: tokens },
    };
    let body = serde_json::to_vec(&response).expect("response serializes");
    state.metrics.embed_success.inc();
    Ok(answered(state, method, start, body, &served))
}
