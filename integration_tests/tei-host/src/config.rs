//! The host's settings: command-line flags (TEI's names where TEI has the setting) and the
//! library's switches from the environment (`RADIX_MLP_THRESHOLD`, `RADIX_MLP_PAD`,
//! `RADIX_MLP_GATE` through `PlanParams::from_env`; the batcher's `RADIX_MLP_BATCHER`,
//! `RADIX_MLP_BATCH_MAX_WAIT_MS` and `RADIX_MLP_BATCH_MAX_ROWS`). `tei-host --help` lists them;
//! docs/tei-host.md explains them.
use std::path::PathBuf;
use std::time::Duration;

use radix_mlp::{BatchMode, PlanParams, Pooling};

/// Where attention runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionMode {
    /// The library's built-in attention; the context keeps the prefix cache.
    Library,
    /// The host's own attention between the library's layer pieces (pre-attention, attention
    /// over the batch rows, post-attention), as TEI keeps its attention; the pieces do not use the
    /// prefix cache, so there is none.
    Host,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub model: PathBuf,
    /// The name in /info and in the OpenAI route's `model` (default: the model folder's name).
    pub model_id: String,
    pub hostname: String,
    /// 0: any free port (the bound one is printed).
    pub port: u16,
    pub max_concurrent_requests: usize,
    pub max_batch_tokens: usize,
    pub max_batch_requests: Option<usize>,
    pub max_client_batch_size: usize,
    /// Longest sequence in tokens (default: the model's max_position_embeddings, at most
    /// max_batch_tokens).
    pub max_input_length: Option<usize>,
    pub auto_truncate: bool,
    /// Request bodies larger than this are refused (413) before they are read.
    pub payload_limit: usize,
    /// A request whose headers or body take longer than this is answered 408 and closed.
    pub read_timeout: Duration,
    pub attention: AttentionMode,
    pub pooling: Pooling,
    /// The prefix cache's budget (library attention only; 0: none).
    pub cache_mb: u64,
    /// Reranking: the two token ids whose LM-head logits give the score (`prob_a`).
    pub score_tokens: Option<(u32, u32)>,
    /// Reranking: the two words whose ids the tokenizer gives (default "yes,no").
    pub score_words: (String, String),
    /// Reranking prompt with `{query}` and `{text}` (text inputs; ids are concatenated).
    pub rerank_template: String,
    /// tokenizer.json (default: the model folder's, when there is one).
    pub tokenizer: Option<PathBuf>,
    pub tokenization_workers: usize,
    /// The Python that runs the tokenizer workers (needs the `tokenizers` package).
    pub python: String,
    pub cpu_threads: Option<usize>,
    /// The batcher's capacity in queued tokens (a push past it is 429).
    pub max_queued_tokens: usize,
    pub batch_mode: BatchMode,
    pub max_wait: Duration,
    /// A batch's compact rows (N', what a RadixMLP forward computes; `RADIX_MLP_BATCH_MAX_ROWS`);
    /// None: no bound beyond `max_batch_tokens`, which then bounds the batch's token ids only.
    pub max_batch_rows: Option<usize>,
    pub plan: PlanParams,
    /// Stays in the loading state (503) this long after loading (tests; staged rollouts).
    pub load_delay: Duration,
    /// Tokens one request may hold in all (413 past it); None: 4 x `max_batch_tokens`.
    pub max_client_batch_tokens: Option<usize>,
    /// Open connections; past it the one idle the longest is closed (None: the descriptor limit
    /// less a reserve, connections.rs).
    pub max_connections: Option<usize>,
    /// After a stop, how long an idle connection stays open for a last request (answered 503).
    pub shutdown_grace: Duration,
    /// CORS origins (TEI's `--cors-allow-origin`); None: any.
    pub cors_allow_origin: Option<Vec<String>>,
    /// Each batch waits this long before its forward (tests only, no flag: work then queues
    /// behind a batch however fast the machine is).
    pub batch_pause: Duration,
    /// One JSON line per batch on stderr with its profile (profile.rs).
    pub profile_batches: bool,
}

pub const USAGE: &str = "usage: tei-host --model DIR [options]
  --model-id NAME                 name in /info and OpenAI responses (default: the folder's name)
  --hostname ADDR                 default 127.0.0.1
  --port N                        default 8080; 0: any free port (printed as 'listening on ADDR')
  --max-concurrent-requests N     default 512; more at once are answered 429
  --max-batch-tokens N            default 16384: the batch budget and the context's size
  --max-batch-requests N          default: no limit but the tokens
  --max-client-batch-size N       default 32; more inputs in one request are answered 413
  --max-input-length N            default: the model's max_position_embeddings, at most max-batch-tokens
  --auto-truncate                 truncate long inputs when the request does not say
  --payload-limit BYTES           default 2000000; larger bodies are answered 413
  --read-timeout-ms N             default 10000: headers and body must arrive within it (else 408)
  --attention library|host        default library (with the prefix cache); host: the host's own
                                  attention between the library's layer pieces (no cache)
  --pooling last|mean|first       default last
  --cache-mb N                    prefix cache per context, default 64 (library attention only)
  --score-tokens A,B              rerank score = p(A) against p(B) at the last token (ids)
  --score-words W1,W2             the same as words of the tokenizer (default yes,no)
  --rerank-template TEXT          rerank prompt with {query} and {text} (default '{query}\\n{text}')
  --tokenizer FILE                tokenizer.json (default: the model folder's)
  --no-tokenizer                  token ids only
  --tokenization-workers N        default 2 Python workers running the tokenizers package
  --python PATH                   default python3
  --cpu-threads N                 the CPU path's threads (default: OPENBLAS_NUM_THREADS, else one per core)
  --max-queued-tokens N           the batcher's capacity in tokens, default 1048576
  --load-delay-ms N               stay 'loading' (503) this long after the model loaded
  --max-client-batch-tokens N     tokens one request may hold in all (413 past it), default 4 x max-batch-tokens
  --max-connections N             open connections; past it the one idle the longest is closed
                                  (default: the descriptor limit less 32 and 2 per tokenizer worker)
  --shutdown-grace-ms N           after SIGTERM, idle connections stay open this long for a last
                                  request (answered 503, Connection: close); default 1000
  --cors-allow-origin ORIGINS     CORS origins, comma-separated or repeated (default: any)
  --profile-batches               one line per batch on stderr: 'tei-host: batch {json}' with its
                                  sequences, N, N', and wait/take/plan/forward/pool/answer times
environment: RADIX_MLP_THRESHOLD, RADIX_MLP_PAD, RADIX_MLP_GATE (the plan: 0 turns radix off),
  RADIX_MLP_BATCHER=prefix|fifo (default prefix), RADIX_MLP_BATCH_MAX_WAIT_MS (default 100),
  RADIX_MLP_BATCH_MAX_ROWS (a batch's compact rows; default: no bound beyond --max-batch-tokens),
  TOKENIZERS_PARALLELISM (the tokenizer workers'; default false)";

/// The unsigned integers a flag holds, with their largest value.
trait Unsigned: std::str::FromStr {
    const MAX: u128;
}

macro_rules! unsigned {
    ($($t:ty),*) => { $(impl Unsigned for $t { const MAX: u128 = <$t>::MAX as u128; })* };
}
unsigned!(u16, u32, u64, usize);

/// A flag's number; one that does not fit is refused by name, not wrapped or clamped.
fn number<T: Unsigned>(flag: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| match value.parse::<u128>() {
        Ok(_) | Err(_) if value.bytes().all(|b| b.is_ascii_digit()) && !value.is_empty() => {
            format!("{flag} {value} is out of range: at most {}", T::MAX)
        }
        _ => format!("{flag} expects a non-negative integer, got '{value}'"),
    })
}

fn positive(flag: &str, value: &str) -> Result<usize, String> {
    match number::<usize>(flag, value)? {
        0 => Err(format!("{flag} must be at least 1")),
        n => Ok(n),
    }
}

fn pair(flag: &str, value: &str) -> Result<(String, String), String> {
    match value.split_once(',') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() && !b.contains(',') => Ok((a.to_string(), b.to_string())),
        _ => Err(format!("{flag} expects two values A,B, got '{value}'")),
    }
}

fn env_batcher() -> Result<(BatchMode, Duration, Option<usize>), String> {
    let mode = match std::env::var("RADIX_MLP_BATCHER").ok().as_deref() {
        None | Some("") | Some("prefix") => BatchMode::Prefix,
        Some("fifo") => BatchMode::Fifo,
        Some(other) => return Err(format!("RADIX_MLP_BATCHER expects prefix or fifo, got '{other}'")),
    };
    let wait = match std::env::var("RADIX_MLP_BATCH_MAX_WAIT_MS").ok().as_deref() {
        None | Some("") => 100,
        Some(ms) => number::<u64>("RADIX_MLP_BATCH_MAX_WAIT_MS", ms)?,
    };
    let rows = match std::env::var("RADIX_MLP_BATCH_MAX_ROWS").ok().as_deref() {
        None | Some("") => None,
        Some(n) => Some(positive("RADIX_MLP_BATCH_MAX_ROWS", n)?),
    };
    Ok((mode, Duration::from_millis(wait), rows))
}

impl Config {
    /// The settings for `model` with every default (the environment's switches read).
    pub fn new(model: impl Into<PathBuf>) -> Result<Config, String> {
        let model = model.into();
        let plan = PlanParams::from_env().map_err(|e| format!("the plan's environment: {e}"))?;
        let (batch_mode, max_wait, max_batch_rows) = env_batcher()?;
        let model_id = model
            .canonicalize()
            .unwrap_or_else(|_| model.clone())
            .file_name()
            .map_or("model".into(), |n| n.to_string_lossy().into_owned());
        Ok(Config {
            model,
            model_id,
            hostname: "127.0.0.1".into(),
            port: 8080,
            max_concurrent_requests: 512,
            max_batch_tokens: 16384,
            max_batch_requests: None,
            max_client_batch_size: 32,
            max_input_length: None,
            auto_truncate: false,
            payload_limit: 2_000_000,
            read_timeout: Duration::from_secs(10),
            attention: AttentionMode::Library,
            pooling: Pooling::Last,
            cache_mb: 64,
            score_tokens: None,
            score_words: ("yes".into(), "no".into()),
            rerank_template: "{query}\n{text}".into(),
            tokenizer: None,
            tokenization_workers: 2,
            python: "python3".into(),
            cpu_threads: None,
            max_queued_tokens: 1 << 20,
            batch_mode,
            max_wait,
            max_batch_rows,
            plan,
            load_delay: Duration::ZERO,
            max_client_batch_tokens: None,
            max_connections: None,
            shutdown_grace: Duration::from_millis(1000),
            cors_allow_origin: None,
            batch_pause: Duration::ZERO,
            profile_batches: false,
        })
    }

    /// Parses the command line (without the program name). `Err` holds the message to print
    /// (the usage for --help, with `Ok(None)`).
    pub fn from_args(args: &[String]) -> Result<Option<Config>, String> {
        let mut model = None;
        let mut flags: Vec<(String, Option<String>)> = Vec::new();
        let mut no_tokenizer = false;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            match flag.as_str() {
                "-h" | "--help" => return Ok(None),
                "--auto-truncate" | "--profile-batches" => flags.push((flag, None)),
                "--no-tokenizer" => no_tokenizer = true,
                _ if !flag.starts_with("--") => return Err(format!("unexpected argument '{arg}'\n{USAGE}")),
                _ => {
                    let value = match inline {
                        Some(v) => v,
                        None => it.next().cloned().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?,
                    };
                    if flag == "--model" {
                        model = Some(value);
                    } else {
                        flags.push((flag, Some(value)));
                    }
                }
            }
        }
        let mut c = Config::new(model.ok_or_else(|| format!("--model DIR is required\n{USAGE}"))?)?;
        for (flag, value) in flags {
            c.set(&flag, value.as_deref().unwrap_or(""))?;
        }
        if no_tokenizer {
            c.tokenizer = None;
        } else if c.tokenizer.is_none() && c.model.join("tokenizer.json").is_file() {
            c.tokenizer = Some(c.model.join("tokenizer.json"));
        }
        c.check()?;
        Ok(Some(c))
    }

    fn set(&mut self, flag: &str, v: &str) -> Result<(), String> {
        match flag {
            "--model-id" => self.model_id = v.into(),
            "--hostname" => self.hostname = v.into(),
            "--port" => self.port = number(flag, v)?,
            "--max-concurrent-requests" => self.max_concurrent_requests = positive(flag, v)?,
            "--max-batch-tokens" => self.max_batch_tokens = positive(flag, v)?,
            "--max-batch-requests" => self.max_batch_requests = Some(positive(flag, v)?),
            "--max-client-batch-size" => self.max_client_batch_size = positive(flag, v)?,
            "--max-input-length" => self.max_input_length = Some(positive(flag, v)?),
            "--auto-truncate" => self.auto_truncate = true,
            "--profile-batches" => self.profile_batches = true,
            "--payload-limit" => self.payload_limit = positive(flag, v)?,
            "--read-timeout-ms" => self.read_timeout = Duration::from_millis(positive(flag, v)? as u64),
            "--attention" => {
                self.attention = match v {
                    "library" => AttentionMode::Library,
                    "host" => AttentionMode::Host,
                    _ => return Err(format!("--attention expects library or host, got '{v}'")),
                }
            }
            "--pooling" => {
                self.pooling = match v {
                    "last" => Pooling::Last,
                    "mean" => Pooling::Mean,
                    "first" => Pooling::First,
                    _ => return Err(format!("--pooling expects last, mean or first, got '{v}'")),
                }
            }
            "--cache-mb" => self.cache_mb = number(flag, v)?,
            "--score-tokens" => {
                let (a, b) = pair(flag, v)?;
                self.score_tokens = Some((number(flag, &a)?, number(flag, &b)?));
            }
            "--score-words" => self.score_words = pair(flag, v)?,
            "--rerank-template" => self.rerank_template = v.into(),
            "--tokenizer" => self.tokenizer = Some(v.into()),
            "--tokenization-workers" => self.tokenization_workers = positive(flag, v)?,
            "--python" => self.python = v.into(),
            "--cpu-threads" => self.cpu_threads = Some(positive(flag, v)?),
            "--max-queued-tokens" => self.max_queued_tokens = positive(flag, v)?,
            "--load-delay-ms" => self.load_delay = Duration::from_millis(number(flag, v)?),
            "--max-client-batch-tokens" => self.max_client_batch_tokens = Some(positive(flag, v)?),
            "--max-connections" => self.max_connections = Some(positive(flag, v)?),
            "--shutdown-grace-ms" => self.shutdown_grace = Duration::from_millis(number(flag, v)?),
            "--cors-allow-origin" => self
                .cors_allow_origin
                .get_or_insert_with(Vec::new)
                .extend(v.split(',').map(str::trim).filter(|o| !o.is_empty()).map(String::from)),
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
        Ok(())
    }

    /// Settings that cannot work together.
    pub fn check(&self) -> Result<(), String> {
        if !self.rerank_template.contains("{query}") || !self.rerank_template.contains("{text}") {
            return Err(format!("--rerank-template must hold {{query}} and {{text}}: '{}'", self.rerank_template));
        }
        if self.max_client_batch_size >= 1 << crate::queue::SEQ_INDEX_BITS {
            return Err(format!("--max-client-batch-size must be below {}", 1u64 << crate::queue::SEQ_INDEX_BITS));
        }
        if self.max_queued_tokens > u32::MAX as usize || self.max_batch_tokens > u32::MAX as usize {
            return Err("--max-queued-tokens and --max-batch-tokens must be below 2^32".into());
        }
        if self.cache_mb > u64::MAX >> 20 {
            return Err(format!("--cache-mb {} overflows: at most {} MB", self.cache_mb, u64::MAX >> 20));
        }
        if let Some(n) = self.max_input_length {
            if n > self.max_batch_tokens {
                return Err(format!(
                    "--max-input-length {n} > --max-batch-tokens {}: such an input fits no batch",
                    self.max_batch_tokens
                ));
            }
        }
        Ok(())
    }

    /// The batcher's capacity in requests: every admitted request's inputs.
    pub fn max_queued_requests(&self) -> u32 {
        (self.max_concurrent_requests.saturating_mul(self.max_client_batch_size).max(1)).min(u32::MAX as usize) as u32
    }

    /// Tokens one request may hold in all.
    pub fn client_batch_tokens(&self) -> usize {
        self.max_client_batch_tokens.unwrap_or(self.max_batch_tokens.saturating_mul(4))
    }

    /// The prefix cache in bytes (none with the host's attention).
    pub fn cache_bytes(&self) -> u64 {
        match self.attention {
            AttentionMode::Library => self.cache_mb << 20,
            AttentionMode::Host => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Result<Option<Config>, String> {
        Config::from_args(&args.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn flags() {
        let c = parse("--model m --port=0 --max-batch-tokens 64 --attention host --score-tokens 3,4 --auto-truncate")
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.port, c.max_batch_tokens, c.attention, c.score_tokens),
            (0, 64, AttentionMode::Host, Some((3, 4)))
        );
        assert!(c.auto_truncate && c.cache_bytes() == 0 && c.tokenizer.is_none() && !c.profile_batches);
        assert!(parse("--model m --profile-batches").unwrap().unwrap().profile_batches);
        assert!(parse("--help").unwrap().is_none());
        for (bad, says) in [
            ("--port 1", "--model DIR is required"),
            ("--model m --max-batch-tokens 0", "--max-batch-tokens must be at least 1"),
            ("--model m --attention gpu", "--attention expects library or host"),
            ("--model m --score-tokens 3", "--score-tokens expects two values"),
            ("--model m --max-batch-tokens 8 --max-input-length 9", "fits no batch"),
            ("--model m --rerank-template x", "{query} and {text}"),
            ("--model m --frobnicate 1", "unknown option --frobnicate"),
            ("--model m --port", "--port needs a value"),
            ("--model m --cache-mb 17592186044416", "--cache-mb 17592186044416 overflows"),
            ("--model m --port 65536", "--port 65536 is out of range"),
            (
                "--model m --max-batch-tokens 99999999999999999999999",
                "--max-batch-tokens 99999999999999999999999 is out of range",
            ),
            ("--model m --max-client-batch-tokens 0", "--max-client-batch-tokens must be at least 1"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
