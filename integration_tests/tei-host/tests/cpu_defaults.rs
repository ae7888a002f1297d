//! The binary's CPU threads (cpu_defaults.rs): it runs as it was started, without starting itself
//! again with an OpenBLAS variable of its own (no OPENBLAS_THREAD_TIMEOUT in /proc/PID/environ when
//! the test leaves it unset), and OpenBLAS runs on one thread inside the CPU path's threads: the
//! startup line gives OpenBLAS's own count as OpenBLAS reports it (`openblas_get_num_threads`) and
//! the library's, with OPENBLAS_NUM_THREADS=2 so that OpenBLAS would start on 2 of its own. The
//! second startup line names the library that runs the fp32 GEMMs, the one `radix_mlp::cpu_sgemm`
//! answers in this process.
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_tei-host");

/// Starts the host on the fixture with `extra` flags, OPENBLAS_NUM_THREADS=2 and no
/// OPENBLAS_THREAD_TIMEOUT; returns its startup lines on threads and on the fp32 GEMMs, and its
/// running environment.
fn start(extra: &[&str]) -> (String, String, Vec<String>) {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/qwen3_tiny");
    let mut cmd = Command::new(BIN);
    cmd.args(["--model", model.to_str().unwrap(), "--port", "0", "--score-tokens", "1,2", "--no-tokenizer"]);
    cmd.args(extra).env("OPENBLAS_NUM_THREADS", "2").env_remove("OPENBLAS_THREAD_TIMEOUT");
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start tei-host");
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("tei-host: the CPU path") {
                let _ = tx.send(line);
            }
        }
    });
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("listening on "), "tei-host did not start: {first:?}");
    let report = rx.recv_timeout(Duration::from_secs(30)).expect("a startup line on OpenBLAS");
    let sgemm = rx.recv_timeout(Duration::from_secs(30)).expect("a startup line on the fp32 GEMMs");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = environ.split(|&b| b == 0).filter_map(|kv| String::from_utf8(kv.to_vec()).ok()).collect();
    let _ = child.kill();
    let _ = child.wait();
    (report, sgemm, environ)
}

#[test]
fn the_host_does_not_start_itself_again_with_an_openblas_variable() {
    let (_, _, environ) = start(&[]);
    assert!(environ.iter().any(|kv| kv == "OPENBLAS_NUM_THREADS=2"), "the test's environment: {environ:?}");
    let spin: Vec<_> = environ.iter().filter(|kv| kv.starts_with("OPENBLAS_THREAD_TIMEOUT")).collect();
    assert!(spin.is_empty(), "the running host's environment has {spin:?}");
}

#[test]
fn openblas_runs_on_one_thread_inside_the_cpu_paths_threads() {
    let (report, _, _) = start(&[]);
    assert_eq!(report, "tei-host: the CPU path runs on 2 threads, OpenBLAS on 1 inside each");
    let (report, _, _) = start(&["--cpu-threads", "3"]);
    assert_eq!(report, "tei-host: the CPU path runs on 3 threads, OpenBLAS on 1 inside each");
}

#[test]
fn the_host_says_which_library_runs_the_fp32_gemms() {
    let (_, sgemm, _) = start(&[]);
    let (_, detail) = radix_mlp::cpu_sgemm().unwrap(); // the same library, CPU and variables here
    assert_eq!(sgemm, format!("tei-host: the CPU path's fp32 GEMMs: {detail}"));
}
