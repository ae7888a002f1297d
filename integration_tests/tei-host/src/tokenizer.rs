//! Text to token ids through the project's tokenizer path for the real model: the `tokenizers`
//! package on the model's tokenizer.json (integration_tests/real_model), in a pool of Python worker
//! processes (src/tokenizer_worker.py) that speak JSON lines over pipes, as TEI runs a pool of
//! tokenization workers. Calls block: the routes run them on tokio's blocking threads. A worker that
//! exits is started again on the next call; every process is killed when the pool is dropped. A
//! call whose client went away while it waited for a worker is not run.
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};

const WORKER: &str = include_str!("tokenizer_worker.py");

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn start(python: &str, tokenizer: &Path) -> Result<(Worker, usize), String> {
        let mut cmd = Command::new(python);
        crate::cpu_defaults::default_env(&mut cmd, "TOKENIZERS_PARALLELISM", "false");
        let mut child = cmd
            .arg("-c")
            .arg(WORKER)
            .arg(tokenizer)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {python} for the tokenizer: {e}"))?;
        let (stdin, stdout) = (child.stdin.take().unwrap(), BufReader::new(child.stdout.take().unwrap()));
        let mut worker = Worker { child, stdin, stdout };
        let first = worker.read().map_err(|e| format!("tokenizer worker ({python}): {e}"))?;
        match first.get("vocab_size").and_then(Value::as_u64) {
            Some(n) => Ok((worker, n as usize)),
            None => Err(format!(
                "tokenizer {}: {} (a Python with the tokenizers package: --python, PYTHONPATH)",
                tokenizer.display(),
                first.get("error").and_then(Value::as_str).unwrap_or("no answer")
            )),
        }
    }

    fn read(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the worker exited".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("unreadable answer: {e}")),
            Err(e) => Err(format!("cannot read the worker's answer: {e}")),
        }
    }

    /// Whether its process has not exited.
    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn ask(&mut self, request: &Value) -> Result<Value, String> {
        writeln!(self.stdin, "{request}").and_then(|_| self.stdin.flush()).map_err(|e| format!("worker gone: {e}"))?;
        self.read()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why a call failed: the text (422), the worker (424), or the caller gave up before a worker
/// was free (its client went away).
#[derive(Debug, PartialEq, Eq)]
pub enum TokenizeError {
    Text(String),
    Worker(String),
    Cancelled,
}

pub struct TokenizerPool {
    python: String,
    path: std::path::PathBuf,
    workers: Vec<Mutex<Option<Worker>>>,
    next: AtomicUsize,
    vocab_size: usize,
}

impl TokenizerPool {
    /// Starts `n` workers on tokenizer.json `path`; `Err` says why the first could not start.
    pub fn start(python: &str, path: &Path, n: usize) -> Result<TokenizerPool, String> {
        let mut workers = Vec::with_capacity(n);
        let mut vocab_size = 0;
        for _ in 0..n.max(1) {
            let (w, v) = Worker::start(python, path)?;
            vocab_size = v;
            workers.push(Mutex::new(Some(w)));
        }
        Ok(TokenizerPool { python: python.into(), path: path.into(), workers, next: AtomicUsize::new(0), vocab_size })
    }

    /// The tokenizer's vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// One request to a free worker (or the next one in turn), started again if it had exited;
    /// none once `cancelled` is set by the time a worker is free. Where the worker dies on the
    /// request (or does not start), the request goes once more to a free worker that is running,
    /// or to a new one in the same place.
    fn ask(&self, request: &Value, cancelled: &AtomicBool) -> Result<Value, TokenizeError> {
        let n = self.workers.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut slot = (0..n)
            .find_map(|i| self.workers[(start + i) % n].try_lock().ok())
            .unwrap_or_else(|| self.workers[start % n].lock().unwrap_or_else(|p| p.into_inner()));
        let mut failure = String::new();
        for attempt in 0..2 {
            if cancelled.load(Ordering::SeqCst) {
                return Err(TokenizeError::Cancelled);
            }
            if slot.is_none() {
                match Worker::start(&self.python, &self.path) {
                    Ok((w, _)) => *slot = Some(w),
                    Err(e) => failure = e,
                }
            }
            if let Some(worker) = slot.as_mut() {
                match worker.ask(request) {
                    Ok(answer) => {
                        return match answer.get("error").and_then(Value::as_str) {
                            Some(e) => Err(TokenizeError::Text(e.to_string())),
                            None => Ok(answer),
                        }
                    }
                    Err(e) => {
                        *slot = None; // exited: the next call here starts another
                        failure = e;
                    }
                }
            }
            if attempt == 0 {
                drop(slot);
                let running = |i: usize| {
                    let mut w = self.workers[(start + i) % n].try_lock().ok()?;
                    w.as_mut()?.running().then_some(w)
                };
                slot = (1..n)
                    .find_map(running)
                    .unwrap_or_else(|| self.workers[start % n].lock().unwrap_or_else(|p| p.into_inner()));
            }
        }
        Err(TokenizeError::Worker(failure))
    }

    /// The ids of each text (with the tokenizer's special tokens, as TEI adds them), unless
    /// `cancelled` is set before a worker takes them.
    pub fn encode(&self, texts: &[&str], cancelled: &AtomicBool) -> Result<Vec<Vec<u32>>, TokenizeError> {
        let answer = self.ask(&json!({ "encode": texts }), cancelled)?;
        let bad = || TokenizeError::Worker("the worker's answer holds no ids".into());
        let lists = answer.get("ids").and_then(Value::as_array).ok_or_else(bad)?;
        let ids: Option<Vec<Vec<u32>>> = lists
            .iter()
            .map(|l| l.as_array()?.iter().map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok())).collect())
            .collect();
        ids.filter(|ids| ids.len() == texts.len()).ok_or_else(bad)
    }

    /// The id of a token of the vocabulary, `None` where it has none.
    pub fn token_to_id(&self, token: &str) -> Result<Option<u32>, TokenizeError> {
        let answer = self.ask(&json!({ "token_to_id": [token] }), &AtomicBool::new(false))?;
        Ok(answer["ids"][0].as_u64().and_then(|x| u32::try_from(x).ok()))
    }
}
