//! What the binary sets for itself before the library loads (cpu_defaults.rs, issue 51): without
//! OPENBLAS_THREAD_TIMEOUT in its environment it starts itself again with 4, so that OpenBLAS, which
//! reads the variable in its constructor before `main`, reads 4; a user's own value is what OpenBLAS
//! reads. The test reads what OpenBLAS reported (its `openblas_thread_timeout()`, printed at startup)
//! and the environment of the running process (/proc/PID/environ), and checks that the re-exec kept
//! the process id and the arguments (the host answers on the port it printed).
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_tei-host");

/// Starts the host on the fixture with `spin` as OPENBLAS_THREAD_TIMEOUT (None: unset); returns its
/// startup report on OpenBLAS and the variable in its running environment.
fn start(spin: Option<&str>) -> (String, Option<String>) {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/qwen3_tiny");
    let mut cmd = Command::new(BIN);
    cmd.args(["--model", model.to_str().unwrap(), "--port", "0", "--score-tokens", "1,2", "--no-tokenizer"]);
    match spin {
        Some(v) => cmd.env("OPENBLAS_THREAD_TIMEOUT", v),
        None => cmd.env_remove("OPENBLAS_THREAD_TIMEOUT"),
    };
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start tei-host");
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("OpenBLAS") || line.contains("OPENBLAS") {
                let _ = tx.send(line);
            }
        }
    });
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("listening on "), "tei-host did not start: {first:?}");
    let report = rx.recv_timeout(Duration::from_secs(30)).expect("a startup line on OpenBLAS");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let value = environ
        .split(|&b| b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok()?.strip_prefix("OPENBLAS_THREAD_TIMEOUT=").map(String::from))
        .next();
    let _ = child.kill();
    let _ = child.wait();
    (report, value)
}

#[test]
fn the_host_sets_openblas_short_spin_when_unset() {
    let (report, value) = start(None);
    assert_eq!(value.as_deref(), Some("4"), "the running host's environment");
    assert!(report.contains("OPENBLAS_THREAD_TIMEOUT=4"), "what OpenBLAS read: {report}");
}

#[test]
fn the_host_keeps_a_users_openblas_spin() {
    let (report, value) = start(Some("9"));
    assert_eq!(value.as_deref(), Some("9"));
    assert!(report.contains("OPENBLAS_THREAD_TIMEOUT=9"), "what OpenBLAS read: {report}");
}
