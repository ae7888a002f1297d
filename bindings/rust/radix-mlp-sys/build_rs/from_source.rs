//! Building libradix_mlp from the sources this crate carries (`csrc/`: symbolic links into the
//! repository, real files in a packaged crate), into `OUT_DIR`, where no installed one is found.
//!
//! * The planner alone (libradix_mlp_plan: C11 and libc): compiled here with the C compiler
//!   (`CC`, else `cc`) and archived with `AR` (else `ar`), the sources read from the
//!   `RMLP_PLAN_SOURCES` list of `csrc/CMakeLists.txt`, so the list has one home. No CMake needed:
//!   this is what a text-embeddings-inference image builds.
//! * The whole library: CMake (3.24 or newer) on `csrc/`, the CPU backend only, with OpenBLAS
//!   and jansson found through pkg-config, as `cmake -S . -B build` would.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A program named by `VAR_<target>`, `VAR_<target with _>`, `TARGET_VAR` or `VAR` (as the `cc`
/// crate reads them), else `default`.
pub fn tool(var: &str, default: &str) -> String {
    let target = env::var("TARGET").unwrap_or_default();
    let names = [format!("{var}_{target}"), format!("{var}_{}", target.replace('-', "_")), format!("TARGET_{var}")];
    for name in names.iter().map(String::as_str).chain([var]) {
        println!("cargo:rerun-if-env-changed={name}");
        if let Ok(value) = env::var(name) {
            if !value.trim().is_empty() {
                return value;
            }
        }
    }
    default.to_string()
}

/// `program ARGS...` as a command; a program given with arguments (`CC="ccache cc"`) is split.
fn command(program: &str) -> Command {
    let mut words = program.split_whitespace();
    let mut cmd = Command::new(words.next().unwrap_or(program));
    cmd.args(words);
    cmd
}

/// Runs `cmd`, failing with its output.
fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{what}: could not run {cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = text.lines().rev().take(40).collect();
    Err(format!("{what} failed ({}): {cmd:?}\n{}", out.status, tail.into_iter().rev().collect::<Vec<_>>().join("\n")))
}

/// Every file under `dir` (through symbolic links), for `rerun-if-changed`.
fn rerun_if_changed(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() {
            rerun_if_changed(&path);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// The sources of `set(NAME ...)` in CMakeLists.txt, `${OTHER}` expanded.
fn cmake_list(cmakelists: &str, name: &str) -> Result<Vec<String>, String> {
    let open = format!("set({name}");
    let start = cmakelists.find(&open).ok_or_else(|| format!("csrc/CMakeLists.txt has no `{open}`"))?;
    let body = &cmakelists[start + open.len()..];
    let body = &body[..body.find(')').ok_or_else(|| format!("`{open}` is not closed"))?];
    let mut files = Vec::new();
    for word in body.split_whitespace().filter(|w| !w.starts_with('#')) {
        match word.strip_prefix("${").and_then(|w| w.strip_suffix('}')) {
            Some(other) => files.extend(cmake_list(cmakelists, other)?),
            None => files.push(word.to_string()),
        }
    }
    Ok(files)
}

/// Compiles the planner (`RMLP_PLAN_SOURCES`) into `OUT_DIR/lib`: `libradix_mlp_plan.a`, or with
/// `shared` `libradix_mlp_plan.so` (the SONAME's file, and the link-time name beside it).
/// Returns the folder.
pub fn planner(csrc: &Path, cc: &str, shared: bool) -> Result<PathBuf, String> {
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let (obj_dir, lib_dir) = (out.join("planner-objects"), out.join("lib"));
    for dir in [&obj_dir, &lib_dir] {
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    for dir in ["common", "trie", "batch", "ffi"] {
        rerun_if_changed(&csrc.join(dir));
    }
    let cmakelists = csrc.join("CMakeLists.txt");
    println!("cargo:rerun-if-changed={}", cmakelists.display());
    let text = fs::read_to_string(&cmakelists).map_err(|e| format!("reading {}: {e}", cmakelists.display()))?;
    let sources = cmake_list(&text, "RMLP_PLAN_SOURCES")?;

    let opt = env::var("OPT_LEVEL").unwrap_or_else(|_| "2".into());
    let mut flags = vec!["-std=c11".to_string(), format!("-O{opt}"), "-fPIC".into(), "-fvisibility=hidden".into()];
    flags.extend(["-ffunction-sections", "-fdata-sections"].map(String::from));
    if env::var("DEBUG").map(|d| d == "true").unwrap_or(false) {
        flags.push("-g".into());
    }
    flags.push(format!("-I{}", csrc.join("ffi/include").display()));
    flags.push(format!("-I{}", csrc.display()));
    flags.extend(tool("CFLAGS", "").split_whitespace().map(String::from));

    // One compiler per job (NUM_JOBS, cargo's -j), objects named after their paths.
    let jobs: usize = env::var("NUM_JOBS").ok().and_then(|n| n.parse().ok()).unwrap_or(1).max(1);
    let mut objects = Vec::new();
    let mut running: Vec<(Child, String)> = Vec::new();
    let wait = |(mut child, source): (Child, String)| -> Result<(), String> {
        let status = child.wait().map_err(|e| format!("compiling {source}: {e}"))?;
        status.success().then_some(()).ok_or_else(|| format!("compiling csrc/{source} failed ({status}); see above"))
    };
    for source in &sources {
        let object = obj_dir.join(source.replace('/', "_")).with_extension("o");
        let child = command(cc)
            .args(&flags)
            .arg("-c")
            .arg(csrc.join(source))
            .arg("-o")
            .arg(&object)
            .spawn()
            .map_err(|e| format!("could not run the C compiler `{cc}` (set CC to one): {e}"))?;
        running.push((child, source.clone()));
        objects.push(object);
        if running.len() >= jobs {
            wait(running.remove(0))?;
        }
    }
    running.into_iter().try_for_each(wait)?;

    if shared {
        let (major, minor) = (env!("CARGO_PKG_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MINOR"));
        let soname = if major == "0" {
            format!("libradix_mlp_plan.so.0.{minor}")
        } else {
            format!("libradix_mlp_plan.so.{major}")
        };
        let mut link = command(cc);
        link.arg("-shared").arg(format!("-Wl,-soname,{soname}")).arg("-o").arg(lib_dir.join(&soname)).args(&objects);
        run(&mut link, "linking libradix_mlp_plan.so")?;
        let _ = fs::remove_file(lib_dir.join("libradix_mlp_plan.so"));
        fs::copy(lib_dir.join(&soname), lib_dir.join("libradix_mlp_plan.so")).map_err(|e| e.to_string())?;
    } else {
        let archive = lib_dir.join("libradix_mlp_plan.a");
        let _ = fs::remove_file(&archive);
        run(command(&tool("AR", "ar")).arg("crs").arg(&archive).args(&objects), "archiving libradix_mlp_plan.a")?;
    }
    Ok(lib_dir)
}

/// Builds the whole library with CMake (CPU backend) into `OUT_DIR/cmake`: `libradix_mlp.so` or
/// `libradix_mlp.a`, with the build folder's `radix_mlp-uninstalled.pc` beside it. Returns the
/// folder.
pub fn full(csrc: &Path, cc: &str, shared: bool) -> Result<PathBuf, String> {
    let build = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?).join("cmake");
    rerun_if_changed(csrc);
    let cmake = env::var("CMAKE").unwrap_or_else(|_| "cmake".into());
    let mut configure = command(&cmake);
    configure.arg("-S").arg(csrc).arg("-B").arg(&build);
    configure.args(["-DCMAKE_BUILD_TYPE=Release", "-DRMLP_BUILD_TESTS=OFF", "-DRMLP_BUILD_PROGRAMS=OFF"]);
    configure.args(["-DRMLP_CUDA=OFF", "-DRMLP_WERROR=OFF"]);
    configure.arg(format!("-DCMAKE_C_COMPILER={}", cc.split_whitespace().next().unwrap_or(cc)));
    run(
        &mut configure,
        "configuring libradix_mlp with CMake (3.24 or newer; OpenBLAS and jansson through pkg-config)",
    )?;
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "1".into());
    let target = if shared { "radix_mlp" } else { "radix_mlp_static" };
    run(command(&cmake).arg("--build").arg(&build).args(["--target", target, "-j", &jobs]), "building libradix_mlp")?;
    Ok(build)
}
