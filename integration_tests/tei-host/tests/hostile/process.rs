//! tei-host as a child process (the binary cargo built for the tests), for what needs a process of
//! its own: a descriptor limit (`ulimit -n`), a signal, its CPU time, its tokenizer workers. Each
//! is killed when dropped.
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::fixture;
use crate::wire::Answer;

const BIN: &str = env!("CARGO_BIN_EXE_tei-host");

pub struct Host {
    child: Child,
    pub addr: SocketAddr,
}

fn base_args() -> Vec<String> {
    let model = fixture("qwen3_tiny").display().to_string();
    ["--model", &model, "--port", "0", "--score-tokens", "1,2", "--max-batch-tokens", "2048"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

impl Host {
    /// The fixture with `extra` flags.
    pub fn start(extra: &[&str]) -> Host {
        let mut cmd = Command::new(BIN);
        cmd.args(base_args()).args(extra);
        Host::spawn(cmd)
    }

    /// The same under `ulimit -n nofile`.
    pub fn start_limited(nofile: u32, extra: &[&str]) -> Host {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\"")).arg(BIN).args(base_args()).args(extra);
        Host::spawn(cmd)
    }

    fn spawn(mut cmd: Command) -> Host {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("start tei-host");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr: SocketAddr =
            line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
        let host = Host { child, addr };
        let start = Instant::now();
        loop {
            let x = crate::wire::exchange(
                addr,
                &crate::wire::request("GET", "/health", &[], b""),
                false,
                1,
                Duration::from_secs(5),
            );
            if x.statuses() == [200] {
                return host;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "tei-host did not get ready");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -SIG pid`.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").arg(format!("-{sig}")).arg(self.pid().to_string()).status().unwrap().success();
        assert!(ok, "kill -{sig}");
    }

    /// The exit code once it exits within `timeout` (None: it did not, or a signal ended it).
    pub fn wait(mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// User and system CPU time so far (/proc/PID/stat, in clock ticks of 1/100 s).
    pub fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after_name.split(' ').collect();
        // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the name and state.
        (fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap()) / 100.0
    }

    /// Kills its child processes (the tokenizer workers); how many.
    pub fn kill_children(&self) -> usize {
        let mut pids = Vec::new();
        for task in std::fs::read_dir(format!("/proc/{}/task", self.pid())).unwrap().flatten() {
            let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            pids.extend(children.split_whitespace().map(String::from));
        }
        for pid in &pids {
            let _ = Command::new("kill").arg("-KILL").arg(pid).status();
        }
        pids.len()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the binary with `args` to its end (flags it refuses).
pub fn run_to_end(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run tei-host")
}

/// Reads one answer from a keep-alive connection (interim ones skipped).
pub fn read_answer(s: &mut TcpStream) -> Answer {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(a) = crate::wire::parse(&raw, false).0.into_iter().next() {
            return a;
        }
        let n = s.read(&mut buf).expect("an answer, not a reset or a timeout");
        assert!(n > 0, "closed without an answer: {:?}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
    }
}
