//! The JSON of the routes, in TEI's shapes: requests read from a parsed body with a message naming
//! the field that is wrong (`inputs[2][5]: -1 is not a token id`), responses written with serde
//! (f32 printed shortest). An input is a text or a list of token ids, as in TEI's `InputType`.
use serde::Serialize;
use serde_json::{Map, Value};

use crate::errors::{ApiError, ErrorKind};

/// One input sequence as the client sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    Text(String),
    Ids(Vec<u32>),
}

/// Which end a too-long input loses (`truncation_direction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Direction {
    Left,
    #[default]
    Right,
}

/// `POST /embed` (and `/`, `/invocations`).
#[derive(Debug)]
pub struct EmbedRequest {
    pub inputs: Vec<Input>,
    pub truncate: Option<bool>,
    pub direction: Direction,
    pub normalize: bool,
    /// Keep the first this many dimensions (then normalize, when asked), as TEI's `dimensions`.
    pub dimensions: Option<usize>,
}

/// `POST /rerank`: `query` and `texts` are texts (or, an extension for models without a tokenizer,
/// token ids).
#[derive(Debug)]
pub struct RerankRequest {
    pub query: Input,
    pub texts: Vec<Input>,
    pub truncate: Option<bool>,
    pub direction: Direction,
    pub raw_scores: bool,
    pub return_text: bool,
}

/// `POST /v1/embeddings`.
#[derive(Debug)]
pub struct OpenAiRequest {
    pub inputs: Vec<Input>,
    pub base64: bool,
    pub model: Option<String>,
    /// OpenAI's `dimensions`: the first this many, renormalised.
    pub dimensions: Option<usize>,
}

fn object(body: &Value) -> Result<&Map<String, Value>, ApiError> {
    body.as_object().ok_or_else(|| ApiError::validation("the body must be a JSON object"))
}

fn flag(o: &Map<String, Value>, key: &str) -> Result<Option<bool>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ApiError::validation(format!("`{key}` must be true or false, got {v}"))),
    }
}

fn direction(o: &Map<String, Value>) -> Result<Direction, ApiError> {
    match o.get("truncation_direction") {
        None | Some(Value::Null) => Ok(Direction::Right),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("right") => Ok(Direction::Right),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("left") => Ok(Direction::Left),
        Some(v) => Err(ApiError::validation(format!("`truncation_direction` must be \"Left\" or \"Right\", got {v}"))),
    }
}

/// `dimensions`: absent, null, or an integer of at least 1.
fn dimensions(o: &Map<String, Value>) -> Result<Option<usize>, ApiError> {
    match o.get("dimensions") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            _ => Err(ApiError::validation(format!("`dimensions` must be an integer of at least 1, got {v}"))),
        },
    }
}

fn ids(list: &[Value], at: &str) -> Result<Vec<u32>, ApiError> {
    list.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| ApiError::validation(format!("{at}[{i}]: {x} is not a token id (0 to 4294967295)")))
        })
        .collect()
}

/// One sequence: a text or a list of ids.
fn input(v: &Value, at: &str) -> Result<Input, ApiError> {
    match v {
        Value::String(s) => Ok(Input::Text(s.clone())),
        Value::Array(list) => Ok(Input::Ids(ids(list, at)?)),
        _ => Err(ApiError::validation(format!("{at} must be a text or a list of token ids, got {v}"))),
    }
}

/// TEI's `Input`: a text, a list of ids, or a list of those. An empty list is no input (400).
fn inputs(v: Option<&Value>, key: &str) -> Result<Vec<Input>, ApiError> {
    let v = v.ok_or_else(|| ApiError::validation(format!("missing field `{key}`")))?;
    match v {
        Value::Array(list) if list.is_empty() => {
            Err(ApiError::new(ErrorKind::Empty, format!("`{key}` cannot be empty")))
        }
        Value::Array(list) if list.iter().all(Value::is_number) => Ok(vec![Input::Ids(ids(list, key)?)]),
        Value::Array(list) => list.iter().enumerate().map(|(i, x)| input(x, &format!("{key}[{i}]"))).collect(),
        _ => Ok(vec![input(v, key)?]),
    }
}

impl EmbedRequest {
    pub fn parse(body: &Value) -> Result<EmbedRequest, ApiError> {
        let o = object(body)?;
        Ok(EmbedRequest {
            inputs: inputs(o.get("inputs"), "inputs")?,
            truncate: flag(o, "truncate")?,
            direction: direction(o)?,
            normalize: flag(o, "normalize")?.unwrap_or(true),
            dimensions: dimensions(o)?,
        })
    }
}

impl RerankRequest {
    pub fn parse(body: &Value) -> Result<RerankRequest, ApiError> {
        let o = object(body)?;
        let query = input(o.get("query").ok_or_else(|| ApiError::validation("missing field `query`"))?, "query")?;
        let texts = match o.get("texts") {
            Some(Value::Array(list)) if list.is_empty() => {
                return Err(ApiError::new(ErrorKind::Empty, "`texts` cannot be empty"))
            }
            Some(Value::Array(list)) => {
                list.iter().enumerate().map(|(i, x)| input(x, &format!("texts[{i}]"))).collect::<Result<_, _>>()?
            }
            Some(v) => return Err(ApiError::validation(format!("`texts` must be a list, got {v}"))),
            None => return Err(ApiError::validation("missing field `texts`")),
        };
        Ok(RerankRequest {
            query,
            texts,
            truncate: flag(o, "truncate")?,
            direction: direction(o)?,
            raw_scores: flag(o, "raw_scores")?.unwrap_or(false),
            return_text: flag(o, "return_text")?.unwrap_or(false),
        })
    }
}

impl OpenAiRequest {
    pub fn parse(body: &Value) -> Result<OpenAiRequest, ApiError> {
        let o = object(body)?;
        let base64 = match o.get("encoding_format") {
            None | Some(Value::Null) => false,
            Some(Value::String(s)) if s == "float" => false,
            Some(Value::String(s)) if s == "base64" => true,
            Some(v) => return Err(ApiError::validation(format!("`encoding_format` must be float or base64, got {v}"))),
        };
        let model = match o.get("model") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(v) => return Err(ApiError::validation(format!("`model` must be a text, got {v}"))),
        };
        Ok(OpenAiRequest { inputs: inputs(o.get("input"), "input")?, base64, model, dimensions: dimensions(o)? })
    }
}

/// One entry of the rerank answer.
#[derive(Serialize, Debug)]
pub struct Rank {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub score: f32,
}

/// An OpenAI embedding: floats, or their little-endian bytes in base64.
#[derive(Serialize, Debug)]
#[serde(untagged)]
pub enum Embedding {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Serialize, Debug)]
pub struct OpenAiEmbedding {
    pub object: &'static str,
    pub embedding: Embedding,
    pub index: usize,
}

#[derive(Serialize, Debug)]
pub struct OpenAiUsage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

#[derive(Serialize, Debug)]
pub struct OpenAiResponse {
    pub object: &'static str,
    pub data: Vec<OpenAiEmbedding>,
    pub model: String,
    pub usage: OpenAiUsage,
}

/// Standard base64 (RFC 4648, padded) of `values` as little-endian f32, as OpenAI's
/// `encoding_format: "base64"` carries them.
pub fn base64_f32(values: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inputs_in_tei_shapes() {
        let parse = |v: Value| EmbedRequest::parse(&json!({ "inputs": v })).map(|r| r.inputs);
        assert_eq!(parse(json!("a")).unwrap(), [Input::Text("a".into())]);
        assert_eq!(parse(json!([1, 2])).unwrap(), [Input::Ids(vec![1, 2])]);
        assert_eq!(parse(json!(["a", [3]])).unwrap(), [Input::Text("a".into()), Input::Ids(vec![3])]);
        assert_eq!(parse(json!([])).unwrap_err().kind, ErrorKind::Empty);
        let e = parse(json!([[1], [2, -1]])).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::Validation, "inputs[1][1]: -1 is not a token id (0 to 4294967295)")
        );
        assert_eq!(parse(json!({"x": 1})).unwrap_err().kind, ErrorKind::Validation);
        assert!(EmbedRequest::parse(&json!({"inputs": "a", "normalize": "yes"})).is_err());
    }

    #[test]
    fn base64_matches_rfc4648() {
        // 1.0f32 = 00 00 80 3f; [1.0, 2.0] = 00 00 80 3f 00 00 00 40
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, 2.0]), "AACAPwAAAEA=");
        assert_eq!(base64_f32(&[]), "");
    }
}
