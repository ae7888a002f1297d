//! From a request's inputs to the token sequences the backend runs, with TEI's checks and codes:
//! more inputs than `--max-client-batch-size` is 413; texts go through the tokenizer workers (a
//! text the tokenizer refuses is 422, a worker that fails 424); an empty sequence or a token id past
//! the vocabulary is 422; a sequence longer than `--max-input-length` is truncated when the request
//! (or `--auto-truncate`) says so, else 413; a request of more than `--max-client-batch-tokens`
//! tokens in all is 413. Reranking pairs become one prompt each: the `--rerank-template` around the
//! query and the text (filled in one pass), or the query's ids then the text's.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Loaded;
use crate::errors::{ApiError, ErrorKind};
use crate::server::State;
use crate::tokenizer::TokenizeError;
use crate::types::{Direction, Input};

/// A request's sequences, ready for the queue.
#[derive(Debug)]
pub struct Prepared {
    pub sequences: Vec<Vec<u32>>,
    pub tokenization: Duration,
    /// Characters of text and ids given (TEI's `x-compute-characters`).
    pub chars: usize,
}

impl Prepared {
    pub fn tokens(&self) -> usize {
        self.sequences.iter().map(Vec::len).sum()
    }
}

fn loaded(state: &State) -> Result<&Loaded, ApiError> {
    state.loaded.get().ok_or_else(|| ApiError::new(ErrorKind::Unhealthy, "the model is loading"))
}

/// 413 past `--max-client-batch-size` (TEI's message).
pub fn check_batch_size(state: &State, n: usize) -> Result<(), ApiError> {
    let max = state.config.max_client_batch_size;
    if n > max {
        return Err(ApiError::too_large(format!("batch size {n} > maximum allowed batch size {max}")));
    }
    Ok(())
}

/// Sets its flag when dropped: the request's future ended (answered, or its client went away).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Tokenizes `texts` on a blocking thread; not at all if the request is dropped before a worker
/// is free (the tokenizers do no work for clients that have gone).
async fn tokenize(state: &Arc<State>, texts: Vec<String>) -> Result<Vec<Vec<u32>>, ApiError> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let state = Arc::clone(state);
    let cancelled = Arc::new(AtomicBool::new(false));
    let _cancel = CancelOnDrop(Arc::clone(&cancelled));
    let job = tokio::task::spawn_blocking(move || {
        let pool = loaded(&state)?.tokenizer.as_ref().expect("checked by the caller");
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        pool.encode(&refs, &cancelled).map_err(|e| match e {
            TokenizeError::Text(m) => ApiError::new(ErrorKind::Tokenizer, format!("tokenizer: {m}")),
            TokenizeError::Worker(m) => ApiError::new(ErrorKind::Backend, format!("tokenizer worker: {m}")),
            TokenizeError::Cancelled => ApiError::new(ErrorKind::Unhealthy, "the client went away"),
        })
    });
    job.await.unwrap_or_else(|e| Err(ApiError::new(ErrorKind::Backend, format!("tokenizer task: {e}"))))
}

/// The checks every sequence passes: not empty, ids within the vocabulary, the length limit.
/// How a route truncates: the request's `truncate` (None: `--auto-truncate`), the direction, and
/// whether the route has a `truncate` field to suggest (the OpenAI route has none).
#[derive(Clone, Copy, Debug)]
pub struct Truncation {
    pub truncate: Option<bool>,
    pub direction: Direction,
    pub suggest: bool,
}

fn finish(
    loaded: &Loaded,
    auto_truncate: bool,
    t: Truncation,
    at: &str,
    mut seq: Vec<u32>,
) -> Result<Vec<u32>, ApiError> {
    if seq.is_empty() {
        return Err(ApiError::validation(format!("{at} is empty: an input needs at least one token")));
    }
    if let Some(j) = seq.iter().position(|&id| id as usize >= loaded.vocab_size) {
        return Err(ApiError::validation(format!(
            "{at}[{j}]: token id {} >= vocab size {}",
            seq[j], loaded.vocab_size
        )));
    }
    let max = loaded.max_input_length;
    if seq.len() > max {
        if !t.truncate.unwrap_or(auto_truncate) {
            let hint = if t.suggest { " (or set `truncate`)" } else { "" };
            return Err(ApiError::too_large(format!(
                "{at}: an input must have less than {max} tokens. Given: {}{hint}",
                seq.len()
            )));
        }
        match t.direction {
            Direction::Right => seq.truncate(max),
            Direction::Left => {
                seq.drain(..seq.len() - max);
            }
        }
    }
    Ok(seq)
}

fn no_tokenizer(at: &str) -> ApiError {
    ApiError::validation(format!("{at} is a text but this model has no tokenizer: send token ids"))
}

/// The sequences of `/embed` and `/v1/embeddings` inputs (`key` names them in messages).
pub async fn embed_inputs(
    state: &Arc<State>,
    key: &str,
    inputs: Vec<Input>,
    t: Truncation,
) -> Result<Prepared, ApiError> {
    check_batch_size(state, inputs.len())?;
    let l = loaded(state)?;
    let start = Instant::now();
    let mut texts = Vec::new();
    let mut chars = 0;
    for (i, x) in inputs.iter().enumerate() {
        match x {
            Input::Text(t) if l.tokenizer.is_none() => return Err(no_tokenizer(&format!("{key}[{i}]"))),
            Input::Text(t) => {
                chars += t.chars().count();
                texts.push(t.clone());
            }
            Input::Ids(ids) => chars += ids.len(),
        }
    }
    let mut encoded = tokenize(state, texts).await?.into_iter();
    let tokenization = start.elapsed();
    let mut sequences = Vec::with_capacity(inputs.len());
    for (i, x) in inputs.into_iter().enumerate() {
        let seq = match x {
            Input::Text(_) => encoded.next().expect("one per text"),
            Input::Ids(ids) => ids,
        };
        sequences.push(finish(l, state.config.auto_truncate, t, &format!("{key}[{i}]"), seq)?);
    }
    check_tokens(state, &sequences)?;
    Ok(Prepared { sequences, tokenization, chars })
}

/// The sequences of a `/rerank` request: one prompt per text. Where the query and the text are both
/// texts, the `--rerank-template` around them, tokenized whole; where either is token ids, the
/// query's ids then the text's (a text side tokenized alone).
pub async fn rerank_inputs(
    state: &Arc<State>,
    query: Input,
    texts: &[Input],
    trunc: Truncation,
) -> Result<Prepared, ApiError> {
    check_batch_size(state, texts.len())?;
    let l = loaded(state)?;
    let start = Instant::now();
    let concat = matches!(query, Input::Ids(_)) || texts.iter().any(|t| matches!(t, Input::Ids(_)));
    let text_of = |x: &Input, at: &str| match x {
        Input::Text(_) if l.tokenizer.is_none() => Err(no_tokenizer(at)),
        Input::Text(t) => Ok(Some(t.clone())),
        Input::Ids(_) => Ok(None),
    };
    let length = |x: &Input| match x {
        Input::Text(t) => t.chars().count(),
        Input::Ids(ids) => ids.len(),
    };
    // What to tokenize, in order: the query (concat mode), then one string per text side.
    let mut strings: Vec<String> = text_of(&query, "query")?.filter(|_| concat).into_iter().collect();
    let mut chars = 0;
    for (i, t) in texts.iter().enumerate() {
        chars += length(&query) + length(t);
        match (text_of(t, &format!("texts[{i}]"))?, &query) {
            (Some(t), Input::Text(q)) if !concat => strings.push(fill_template(&state.config.rerank_template, q, &t)),
            (Some(t), _) => strings.push(t),
            (None, _) => {}
        }
    }
    let mut encoded = tokenize(state, strings).await?.into_iter();
    let tokenization = start.elapsed();
    let query_ids = match (&query, concat) {
        (Input::Ids(ids), _) => ids.clone(),
        (Input::Text(_), true) => encoded.next().expect("the query's ids"),
        (Input::Text(_), false) => Vec::new(),
    };
    let mut sequences = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let own = match t {
            Input::Text(_) => encoded.next().expect("one per text"),
            Input::Ids(ids) => ids.clone(),
        };
        let seq = if concat { [query_ids.as_slice(), &own].concat() } else { own };
        sequences.push(finish(l, state.config.auto_truncate, trunc, &format!("texts[{i}]"), seq)?);
    }
    check_tokens(state, &sequences)?;
    Ok(Prepared { sequences, tokenization, chars })
}

/// 413 past `--max-client-batch-tokens`: one request cannot hold the backend for longer than
/// that many tokens take.
fn check_tokens(state: &State, sequences: &[Vec<u32>]) -> Result<(), ApiError> {
    let (n, max) = (sequences.iter().map(Vec::len).sum::<usize>(), state.config.client_batch_tokens());
    if n > max {
        return Err(ApiError::too_large(format!(
            "the request has {n} tokens, more than --max-client-batch-tokens {max}"
        )));
    }
    Ok(())
}

/// The rerank prompt: `template` with each `{query}` and `{text}` replaced in one pass, so that
/// braces in the query or the text stay text.
pub fn fill_template(template: &str, query: &str, text: &str) -> String {
    let mut out = String::with_capacity(template.len() + query.len() + text.len());
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("{query}") {
            out.push_str(query);
            rest = after;
        } else if let Some(after) = rest.strip_prefix("{text}") {
            out.push_str(text);
            rest = after;
        } else {
            out.push('{');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::fill_template;

    #[test]
    fn the_template_is_filled_in_one_pass() {
        assert_eq!(fill_template("{query}\n{text}", "{text}", "p"), "{text}\np");
        assert_eq!(fill_template("{query}\n{text}", "q", "{query}"), "q\n{query}");
        assert_eq!(fill_template("Q: {query} {x} {{text}} {text}", "a", "b"), "Q: a {x} {b} b");
        assert_eq!(fill_template("{text}{query}{", "", "é"), "é{");
    }
}
