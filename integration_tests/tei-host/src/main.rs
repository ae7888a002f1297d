//! `tei-host --model DIR [options]` (`--help`): serves TEI's routes on the model until SIGTERM or
//! SIGINT, then drains the queue and exits 0; exits 1 with a message when the model, the tokenizer
//! or the flags are wrong, 2 on bad flags. Prints `listening on ADDR` once bound and
//! `tei-host: ready` once the model is loaded (the routes answer 503 until then). Says on stderr
//! how many threads the CPU path runs on and OpenBLAS's count inside each (cpu_defaults.rs).
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use tei_host::{Config, Server};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match Config::from_args(&args) {
        Ok(Some(c)) => c,
        Ok(None) => {
            println!("{}", tei_host::config::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("tei-host: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(n) = config.cpu_threads {
        if let Err(e) = radix_mlp::set_cpu_threads(n) {
            eprintln!("tei-host: --cpu-threads {n}: {e}");
            return ExitCode::from(2);
        }
    }
    eprintln!("{}", tei_host::cpu_defaults::threads_report());
    eprintln!("{}", tei_host::cpu_defaults::sgemm_report());
    let start = Instant::now();
    let mut server = match Server::start(config, true) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tei-host: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("listening on {}", server.addr);
    let _ = std::io::stdout().flush();
    match server.wait() {
        Ok(()) => {
            eprintln!("tei-host: stopped after {:.1} s", start.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tei-host: {e}");
            ExitCode::FAILURE
        }
    }
}
