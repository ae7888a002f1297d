//! The transformers fixtures of `integration_tests/fixtures` (see its README.md), read with std
//! only: `batch.json` through a tiny JSON-array reader, `expected.safetensors` through a tiny
//! safetensors reader. Nothing here uses radix_mlp, so `integration_tests/rust-host` includes
//! this same file (`#[path]`) rather than a copy.
#![allow(dead_code)]
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The fixture checkpoints: every folder of `integration_tests/fixtures` (`names_cover_every_fixture`
/// fails when one is added without being listed here).
pub const NAMES: [&str; 17] = [
    "qwen3_tiny",
    "qwen3_bf16",
    "qwen2_sharded",
    "llama_tiny",
    "qwen3_embedding_noprefix",
    "llama_bias",
    "qwen3_bias",
    "qwen2_bias",
    "mistral_bias",
    "qwen2_window",
    "mistral_window",
    "llama3_rope",
    "qwen2_yarn",
    "qwen3_linear",
    "gemma_bias",
    "gemma2_window",
    "gemma3_text",
];

/// Tolerance against transformers (the fixtures' README).
pub const TOLERANCE: f32 = 1e-4;

/// One fixture: its checkpoint folder, its batch (sequences back to back) and the F32 tensors
/// of `expected.safetensors` by name (`last_hidden`, `pooled_last`, `pooled_mean`, `logits_last`).
pub struct Fixture {
    pub name: &'static str,
    pub dir: PathBuf,
    pub input_ids: Vec<u32>,
    pub position_ids: Vec<u32>,
    pub cu_seqlens: Vec<u32>,
    pub expected: HashMap<String, Tensor>,
}

pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Fixture {
    pub fn load(name: &'static str) -> Fixture {
        let dir = fixtures_dir().join(name);
        let json = fs::read_to_string(dir.join("batch.json")).expect("batch.json");
        let (input_ids, position_ids, cu_seqlens) =
            (json_numbers(&json, "input_ids"), json_numbers(&json, "position_ids"), json_numbers(&json, "cu_seqlens"));
        assert_eq!(input_ids.len(), position_ids.len(), "{name}: batch.json");
        assert_eq!(cu_seqlens.last().map(|&n| n as usize), Some(input_ids.len()), "{name}: batch.json");
        let expected = read_safetensors(&dir.join("expected.safetensors"));
        Fixture { name, dir, input_ids, position_ids, cu_seqlens, expected }
    }

    pub fn tensor(&self, name: &str) -> &Tensor {
        self.expected.get(name).unwrap_or_else(|| panic!("{}: no tensor {name}", self.name))
    }
}

/// `integration_tests/fixtures`: `RADIX_MLP_FIXTURES` where set (a test binary built on one machine
/// and run on another: tests/rust_device_buffers.sh), else found from the crate's folder upwards.
pub fn fixtures_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("RADIX_MLP_FIXTURES") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("integration_tests/fixtures"))
        .find(|dir| dir.is_dir())
        .expect("integration_tests/fixtures above the crate")
}

/// Max |a - b| (infinite on a length mismatch or a NaN).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter().zip(b).map(|(x, y)| if (x - y).is_nan() { f32::INFINITY } else { (x - y).abs() }).fold(0.0, f32::max)
}

/// Every unsigned integer of the (possibly nested) array that follows `"key":`, flattened.
fn json_numbers(json: &str, key: &str) -> Vec<u32> {
    json_rows(json, key).concat()
}

/// The innermost arrays of unsigned integers in the array that follows `"key":` (a flat array is
/// one row; `[[1, 2], [3]]` two), in order: enough JSON for the fixtures' id lists.
pub fn json_rows(json: &str, key: &str) -> Vec<Vec<u32>> {
    let quoted = format!("\"{key}\"");
    let at = json.find(&quoted).unwrap_or_else(|| panic!("no {quoted}")) + quoted.len();
    let rest = json[at..].trim_start().strip_prefix(':').expect("':' after the key").trim_start();
    assert!(rest.starts_with('['), "{key} is not an array");
    // the open arrays: their numbers, and whether an array opened inside them
    let (mut open, mut rows, mut current) = (Vec::<(Vec<u32>, bool)>::new(), Vec::new(), None::<u32>);
    for c in rest.chars() {
        if let Some(d) = c.to_digit(10) {
            current = Some(current.unwrap_or(0) * 10 + d);
            continue;
        }
        if let Some(n) = current.take() {
            open.last_mut().expect("a number inside the array").0.push(n);
        }
        match c {
            '[' => {
                if let Some(parent) = open.last_mut() {
                    parent.1 = true;
                }
                open.push((Vec::new(), false));
            }
            ']' => {
                let (numbers, nested) = open.pop().expect("balanced brackets");
                assert!(!nested || numbers.is_empty(), "{key}: numbers beside arrays");
                if !nested {
                    rows.push(numbers);
                }
                if open.is_empty() {
                    return rows;
                }
            }
            ',' | ' ' | '\n' | '\r' | '\t' => {}
            other => panic!("{key}: unexpected {other:?} in the array"),
        }
    }
    panic!("{key}: unterminated array")
}

/// The unsigned integer that follows `"key":`.
pub fn json_u32(json: &str, key: &str) -> u32 {
    let quoted = format!("\"{key}\"");
    let at = json.find(&quoted).unwrap_or_else(|| panic!("no {quoted}")) + quoted.len();
    let rest = json[at..].trim_start().strip_prefix(':').expect("':' after the key").trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("{key}: not an unsigned integer"))
}

/// The F32 tensors of a safetensors file: an 8-byte little-endian header length, a JSON header
/// `{"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}`, the data.
pub fn read_safetensors(path: &Path) -> HashMap<String, Tensor> {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).expect("UTF-8 header");
    let data = &bytes[8 + header_len..];
    let mut tensors = HashMap::new();
    // Each tensor's entry is `"name": {...}` with no nested object; __metadata__ is skipped.
    for entry in header.split('}').filter(|e| e.contains("\"data_offsets\"")) {
        let name = entry.split('"').nth(1).expect("tensor name");
        assert!(entry.contains("\"F32\""), "{name}: not F32");
        let shape: Vec<usize> = json_numbers(entry, "shape").into_iter().map(|n| n as usize).collect();
        let offsets = json_numbers(entry, "data_offsets");
        let raw = &data[offsets[0] as usize..offsets[1] as usize];
        assert_eq!(raw.len(), 4 * shape.iter().product::<usize>(), "{name}: size");
        let values = raw.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        tensors.insert(name.to_string(), Tensor { shape, data: values });
    }
    tensors
}
