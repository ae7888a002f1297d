//! The layer calls on buffers a host owns, host or device, through one generic path (`layers`):
//! embed, each layer's first half, the host's own attention (plain f32 loops, below) between the
//! halves, its second half, the final norm and the read-outs. Q, K and V go to the attention
//! scattered to the batch rows (as TEI's RadixMLP pull request feeds its flash-attention) or in
//! compact space.
//!
//! On the CPU model (every run) the path runs on host slices and matches `forward` and
//! transformers; device slices are refused by name. On a CUDA device the same path runs on device
//! buffers the test allocated itself through the CUDA driver (tests/cuda_driver), over weights it
//! uploaded and bound in TEI's stacked layout (`Model::bind_cuda`), as a candle host would, and
//! matches the CPU's forward; so do the device attention callback and the device read-outs.
//! Without a CUDA build or device that test prints SKIP on stderr and passes.
//! `Model::bind_cuda_config` (the model from config.json) is checked on every machine up to the
//! device: its config's errors, and the windowed and RoPE-scaled fixtures read past their config.
mod common;
mod cuda_driver;

use std::io::Write;

use common::{max_abs_diff, Fixture, TOLERANCE};
use cuda_driver::{DeviceBuf, Driver};
use radix_mlp::{
    Buffer, BufferMut, Context, DType, DeviceAttentionArgs, DeviceSlice, DeviceSliceMut, Error, Gate, Model,
    ModelConfig, Plan, PlanParams, Planner, Pooling, Status, WeightBinding,
};

/// Radix always on, compact rows padded to a multiple of 8 (padding rows reach every call).
const PADDED: PlanParams = PlanParams { threshold: 1.0, pad_multiple_of: Some(8), gate: Gate::Distinct };

/// Causal attention with grouped KV heads in plain f32, the host's own: full space (`layout`
/// None: every sequence's queries and keys are its batch rows) or compact space (`layout`
/// `(qo_indptr, kv_indices)`: sequence s's queries are the compact rows it owns, its keys its
/// path's rows). Returns `rows` x q_dim (rows past the queries stay zero).
fn own_attention(
    c: &ModelConfig,
    cu: &[u32],
    layout: Option<(&[u32], &[u32])>,
    rows: usize,
    [q, k, v]: [&[f32]; 3],
) -> Vec<f32> {
    let (d, heads, kv_heads) = (c.head_dim, c.num_attention_heads, c.num_key_value_heads);
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![0.0f32; rows * heads * d];
    for s in 0..cu.len() - 1 {
        let (start, end) = (cu[s] as usize, cu[s + 1] as usize);
        let (keys, queries): (Vec<usize>, _) = match layout {
            None => ((start..end).collect(), start..end),
            Some((qo, kv)) => {
                (kv[start..end].iter().map(|&r| r as usize).collect(), qo[s] as usize..qo[s + 1] as usize)
            }
        };
        let first = keys.len() - queries.len();
        for (t, i) in queries.enumerate() {
            let seen = &keys[..=first + t];
            for h in 0..heads {
                let kvh = h / (heads / kv_heads);
                let qrow = &q[(i * heads + h) * d..][..d];
                let kv_at = |x: &[f32], j: usize| x[(j * kv_heads + kvh) * d..][..d].to_vec();
                let w: Vec<f32> = seen
                    .iter()
                    .map(|&j| qrow.iter().zip(kv_at(k, j)).map(|(a, b)| a * b).sum::<f32>() * scale)
                    .collect();
                let max = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = w.iter().map(|x| (x - max).exp()).collect();
                let sum: f32 = e.iter().sum();
                let o = &mut out[(i * heads + h) * d..][..d];
                for (&j, ej) in seen.iter().zip(&e) {
                    o.iter_mut().zip(kv_at(v, j)).for_each(|(o, v)| *o += ej / sum * v);
                }
            }
        }
    }
    out
}

/// Where a host keeps its activations: `Vec<f32>` in host memory, or device buffers.
trait Memory {
    type Buf<'m>
    where
        Self: 'm;
    fn upload<'m>(&'m self, data: &[f32]) -> Self::Buf<'m>;
    fn download(&self, buf: &Self::Buf<'_>) -> Vec<f32>;
    fn read<'b>(buf: &'b Self::Buf<'_>) -> Buffer<'b>;
    fn write<'b>(buf: &'b mut Self::Buf<'_>) -> BufferMut<'b>;
}

struct Host;

impl Memory for Host {
    type Buf<'m> = Vec<f32>;
    fn upload(&self, data: &[f32]) -> Vec<f32> {
        data.to_vec()
    }
    fn download(&self, buf: &Vec<f32>) -> Vec<f32> {
        buf.clone()
    }
    fn read<'b>(buf: &'b Vec<f32>) -> Buffer<'b> {
        buf.into()
    }
    fn write<'b>(buf: &'b mut Vec<f32>) -> BufferMut<'b> {
        buf.into()
    }
}

impl Memory for Driver {
    type Buf<'m> = DeviceBuf<'m>;
    fn upload<'m>(&'m self, data: &[f32]) -> DeviceBuf<'m> {
        Driver::upload(self, data)
    }
    fn download(&self, buf: &DeviceBuf<'_>) -> Vec<f32> {
        Driver::download(self, buf)
    }
    fn read<'b>(buf: &'b DeviceBuf<'_>) -> Buffer<'b> {
        buf.slice().into()
    }
    fn write<'b>(buf: &'b mut DeviceBuf<'_>) -> BufferMut<'b> {
        buf.slice_mut().into()
    }
}

/// What `layers` gave: the final hidden state of every batch row, and the pooled rows.
struct Output {
    rows: Vec<f32>,
    pooled_last: Vec<f32>,
    pooled_mean: Vec<f32>,
}

/// The generic path: the per-layer calls on `mem`'s buffers, the host's attention between the
/// halves (its inputs downloaded, its output uploaded), in compact space or with Q/K/V scattered
/// to the batch rows.
fn layers<M: Memory>(mem: &M, ctx: &mut Context<'_>, plan: &Plan, compact: bool) -> Result<Output, Error> {
    let c = ctx.model().config().clone();
    let (n, padded, h) = (plan.n_tokens, plan.n_compact_padded, c.hidden_size);
    let rows = if compact { padded } else { n };
    ctx.set_plan(plan)?;
    let zeros = |len: usize| mem.upload(&vec![0.0; len]);
    let mut hidden = zeros(padded * h);
    let (mut q, mut k, mut v) = (zeros(rows * c.q_dim()), zeros(rows * c.kv_dim()), zeros(rows * c.kv_dim()));
    ctx.embed(plan, M::write(&mut hidden))?;
    for layer in 0..c.num_hidden_layers {
        let (wq, wk, wv) = (M::write(&mut q), M::write(&mut k), M::write(&mut v));
        if compact {
            ctx.pre_attention_compact(layer, plan, M::read(&hidden), wq, wk, wv)?;
        } else {
            ctx.pre_attention(layer, plan, M::read(&hidden), wq, wk, wv)?;
        }
        let layout = compact.then_some((&plan.qo_indptr[..], &plan.scatter[..]));
        let qkv = [mem.download(&q), mem.download(&k), mem.download(&v)];
        let attn = mem.upload(&own_attention(&c, &plan.cu_seqlens, layout, rows, [&qkv[0], &qkv[1], &qkv[2]]));
        if compact {
            ctx.post_attention_compact(layer, plan, M::read(&attn), M::write(&mut hidden))?;
        } else {
            ctx.post_attention(layer, plan, M::read(&attn), M::write(&mut hidden))?;
        }
    }
    let mut out = zeros(rows * h);
    let cu = &plan.cu_seqlens;
    let (pooled_last, pooled_mean, final_rows) = if compact {
        ctx.final_norm_compact(plan, M::read(&hidden), M::write(&mut out))?;
        let compact_rows = mem.download(&out);
        let rows = plan.scatter.iter().flat_map(|&r| compact_rows[r as usize * h..][..h].to_vec()).collect();
        let last = ctx.pool_compact(plan, M::read(&out), Pooling::Last, false)?;
        (last, ctx.pool_compact(plan, M::read(&out), Pooling::Mean, false)?, rows)
    } else {
        ctx.final_norm(plan, M::read(&hidden), M::write(&mut out))?;
        let last = ctx.pool(M::read(&out), cu, Pooling::Last, false)?;
        (last, ctx.pool(M::read(&out), cu, Pooling::Mean, false)?, mem.download(&out))
    };
    Ok(Output { rows: final_rows, pooled_last, pooled_mean })
}

fn plan_of(f: &Fixture) -> Plan {
    let plan = Planner::new().unwrap().build(&f.input_ids, &f.position_ids, &f.cu_seqlens, &PADDED).unwrap().to_owned();
    assert!(plan.n_compact < plan.n_tokens && plan.n_compact_padded > plan.n_compact, "{}: shares and pads", f.name);
    plan
}

/// Max |got - want| within `rel` of max |want|.
fn assert_close(what: &str, got: &[f32], want: &[f32], rel: f32) {
    let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let diff = max_abs_diff(got, want);
    assert!(diff <= rel * scale.max(1.0), "{what}: max abs error {diff} > {rel} x max |want| {scale}");
}

#[test]
fn host_buffers_run_the_generic_path() {
    for name in ["qwen3_tiny", "llama_bias", "qwen2_bias"] {
        let f = Fixture::load(name);
        let model = Model::load(&f.dir).unwrap();
        let plan = plan_of(&f);
        let h = model.config().hidden_size;
        let mut ctx = model.context(plan.n_tokens).unwrap();
        let mut want = vec![0.0; plan.n_tokens * h];
        ctx.forward(&plan, &mut want).unwrap();
        let (want_last, want_mean) = (
            model.pool(&want, &plan.cu_seqlens, Pooling::Last, false).unwrap(),
            model.pool(&want, &plan.cu_seqlens, Pooling::Mean, false).unwrap(),
        );
        for compact in [false, true] {
            let what = format!("{name} ({})", if compact { "compact space" } else { "Q/K/V scattered to batch rows" });
            let got = layers(&Host, &mut ctx, &plan, compact).unwrap();
            // The host's attention sums in another order than the library's: fp32 rounding only.
            assert_close(&format!("{what}: rows vs forward"), &got.rows, &want, 1e-5);
            assert_close(&format!("{what}: last pooling"), &got.pooled_last, &want_last, 1e-5);
            assert_close(&format!("{what}: mean pooling"), &got.pooled_mean, &want_mean, 1e-5);
            let diff = max_abs_diff(&got.rows, &f.tensor("last_hidden").data);
            assert!(diff <= TOLERANCE, "{what}: differs from transformers by {diff}");
        }
    }
}

fn refused(result: Result<(), Error>, call: &str, name: &str) {
    let err = result.expect_err("a device slice on a CPU model");
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    let want =
        format!("radix_mlp::Context::{call}: {name} is device memory (a DeviceSlice), but the model runs on the CPU");
    assert!(err.message.starts_with(&want), "{call}: {}", err.message);
}

#[test]
fn device_slices_are_refused_on_a_cpu_model() {
    let f = Fixture::load("qwen3_tiny");
    let model = Model::load(&f.dir).unwrap();
    let plan = plan_of(&f);
    let c = model.config().clone();
    let mut ctx = model.context(plan.n_tokens).unwrap();
    let big = plan.n_tokens * c.q_dim().max(c.hidden_size);
    let mut host = vec![0.0f32; big];
    let mut host2 = vec![0.0f32; big];
    // An address the library never sees: the crate refuses device memory for a CPU model first.
    let fake = std::ptr::NonNull::<f32>::dangling().as_ptr().cast();
    // SAFETY: the crate checks the memory kind against the model before anything reads the slice.
    let (dev, mut dev_mut, mut dev_mut2) = unsafe {
        let mutable = || DeviceSliceMut::from_raw_parts(fake, big, DType::F32);
        (DeviceSlice::from_raw_parts(fake, big, DType::F32), mutable(), mutable())
    };
    refused(ctx.embed(&plan, &mut dev_mut), "embed", "hidden");
    refused(ctx.pre_attention(0, &plan, dev, &mut host, &mut host2, &mut dev_mut), "pre_attention", "hidden");
    refused(
        ctx.pre_attention_compact(0, &plan, &host, &mut dev_mut, &mut host2, &mut dev_mut2),
        "pre_attention_compact",
        "q",
    );
    refused(ctx.post_attention(0, &plan, dev, &mut host), "post_attention", "attn");
    refused(ctx.post_attention_compact(0, &plan, &host, &mut dev_mut), "post_attention_compact", "hidden");
    refused(ctx.final_norm(&plan, &host, &mut dev_mut), "final_norm", "out");
    refused(ctx.final_norm_compact(&plan, dev, &mut host), "final_norm_compact", "hidden");
    refused(ctx.forward(&plan, &mut dev_mut), "forward", "out");
    refused(ctx.forward_compact(&plan, &mut dev_mut), "forward_compact", "out");
    refused(ctx.pool(dev, &plan.cu_seqlens, Pooling::Last, false).map(drop), "pool", "hidden");
    refused(ctx.pool_compact(&plan, dev, Pooling::Mean, true).map(drop), "pool_compact", "hidden");
    refused(ctx.score_pair(dev, &plan.cu_seqlens, 1, 2).map(drop), "score_pair", "hidden");
    refused(ctx.score_pair_compact(&plan, dev, 1, 2).map(drop), "score_pair_compact", "hidden");
    let mut args = DeviceAttentionArgs {
        layer: 0,
        n_heads: c.num_attention_heads,
        n_kv_heads: c.num_key_value_heads,
        head_dim: c.head_dim,
        scale: 1.0,
        sliding_window: 0,
        softcap: 0.0,
        max_seqlen: 0,
        cu_seqlens: &plan.cu_seqlens,
        cu_seqlens_device: None,
        q: dev,
        k: dev,
        v: dev,
        out: dev_mut.reborrow(),
        stream: radix_mlp::Stream::LEGACY,
        compact: None,
    };
    refused(ctx.device_attention(&mut args), "device_attention", "q");
    // A device callback on a CPU model, and a device slice of another dtype: named.
    let err = ctx.forward_with_device_attention(&plan, &mut host, &mut |_| Ok(())).unwrap_err();
    assert_eq!(err.message, "radix_mlp::Context::forward_with_device_attention: the attention of a CPU model takes host slices: use forward_with_attention / forward_compact_with_attention");
    // Lengths are checked in the slice's own unit.
    let short = &mut host[..10];
    let err = ctx.embed(&plan, short).unwrap_err();
    let want = format!("hidden has 10 floats, needs {} rows x {}", plan.n_compact_padded, c.hidden_size);
    assert!(err.message.ends_with(&want), "{}", err.message);
}

/// The checkpoint's tensors as a TEI-style host holds them: Q/K/V and gate/up stacked
/// (`qkv_proj`, `gate_up_proj`, weights and biases), names without `model.`: (name, shape, data).
fn tei_layout(f: &Fixture) -> Vec<(String, Vec<u64>, Vec<f32>)> {
    let tensors = common::read_safetensors(&f.dir.join("model.safetensors"));
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let short = name.strip_prefix("model.").unwrap_or(name);
        let stack = |parts: &[&str], into: &str| {
            let (first, rest) = short.split_once(parts[0]).expect("the first member's name");
            let members: Vec<String> = parts.iter().map(|p| format!("model.{first}{p}{rest}")).collect();
            let data: Vec<f32> = members.iter().flat_map(|m| tensors[m].data.iter().copied()).collect();
            let mut shape = vec![members.iter().map(|m| tensors[m].shape[0] as u64).sum()];
            shape.extend(tensors[&members[0]].shape.get(1).map(|&c| c as u64));
            (format!("{first}{into}{rest}"), shape, data)
        };
        out.push(if short.contains("self_attn.q_proj") {
            stack(&["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "self_attn.qkv_proj")
        } else if short.contains("mlp.gate_proj") {
            stack(&["mlp.gate_proj", "mlp.up_proj"], "mlp.gate_up_proj")
        } else if ["self_attn.k_proj", "self_attn.v_proj", "mlp.up_proj"].iter().any(|p| short.contains(p)) {
            continue; // stacked with its first member
        } else {
            let t = &tensors[name];
            (short.to_string(), t.shape.iter().map(|&d| d as u64).collect(), t.data.clone())
        });
    }
    out
}

#[test]
fn tei_layout_stacks_what_bind_cuda_takes() {
    // The GPU test's input, checked here: stacked shapes from the config, q rows then k then v.
    for name in ["qwen3_tiny", "llama_bias"] {
        let f = Fixture::load(name);
        let c = Model::load(&f.dir).unwrap().config().clone();
        let layout = tei_layout(&f);
        let find = |n: &str| layout.iter().find(|t| t.0 == n).unwrap_or_else(|| panic!("{name}: no {n}"));
        let (h, qkv, inter) = (c.hidden_size as u64, (c.q_dim() + 2 * c.kv_dim()) as u64, c.intermediate_size as u64);
        for l in 0..c.num_hidden_layers {
            let (_, shape, data) = find(&format!("layers.{l}.self_attn.qkv_proj.weight"));
            assert_eq!(shape, &[qkv, h]);
            let k = &common::read_safetensors(&f.dir.join("model.safetensors"))
                [&format!("model.layers.{l}.self_attn.k_proj.weight")];
            assert_eq!(&data[c.q_dim() * c.hidden_size..][..k.data.len()], &k.data[..], "{name}: k rows after q");
            assert_eq!(find(&format!("layers.{l}.mlp.gate_up_proj.weight")).1, [2 * inter, h]);
            if c.attention_bias {
                assert_eq!(find(&format!("layers.{l}.self_attn.qkv_proj.bias")).1, [qkv]);
            }
            if c.mlp_bias {
                assert_eq!(find(&format!("layers.{l}.mlp.gate_up_proj.bias")).1, [2 * inter]);
            }
        }
        assert!(layout.iter().all(|t| !t.0.starts_with("model.") && !t.0.contains("q_proj.")), "{name}");
        find("embed_tokens.weight");
        find("norm.weight");
    }
}

/// A host attention callback's work on device buffers: q, k, v down, [`own_attention`] in the
/// args' layout, the output up on the args' stream.
fn attend_on_host(driver: &Driver, c: &ModelConfig, a: &mut DeviceAttentionArgs<'_>) {
    let layout = a.compact.map(|l| (l.qo_indptr, l.kv_indices));
    let qkv = [&a.q, &a.k, &a.v].map(|s| driver.download_raw(s.as_ptr(), s.len()));
    let attn = own_attention(c, a.cu_seqlens, layout, a.n_rows(), [&qkv[0], &qkv[1], &qkv[2]]);
    driver.upload_raw(a.out.as_mut_ptr(), &attn, a.stream);
}

/// Writes "SKIP ...: why" to stderr itself, where cargo's output capture does not hide it.
fn skip(why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIP device_buffers::bound_weights_on_device_buffers: {why}");
}

#[test]
fn bound_weights_on_device_buffers() {
    match radix_mlp::cuda_device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) => return skip("no CUDA device"),
        Err(e) if matches!(e.status, Status::Unsupported | Status::NoDevice) => return skip(&e.message),
        Err(e) => panic!("{e}"),
    }
    let driver =
        Driver::new().unwrap_or_else(|e| panic!("the library sees a CUDA device, the test's driver does not: {e}"));
    for name in ["qwen3_tiny", "llama_bias"] {
        let f = Fixture::load(name);
        let cpu = Model::load(&f.dir).unwrap();
        let c = cpu.config().clone();
        let plan = plan_of(&f);
        let (n, h) = (plan.n_tokens, c.hidden_size);
        let mut want = vec![0.0; n * h];
        cpu.context(n).unwrap().forward(&plan, &mut want).unwrap();
        let want_last = cpu.pool(&want, &plan.cu_seqlens, Pooling::Last, false).unwrap();

        let weights: Vec<_> =
            tei_layout(&f).into_iter().map(|(name, shape, data)| (name, shape, driver.upload(&data))).collect();
        let bindings: Vec<WeightBinding<'_>> =
            weights.iter().map(|(name, shape, buf)| WeightBinding { name, data: buf.ptr(), shape }).collect();
        // SAFETY: every pointer is our device allocation holding the tensor, alive past the model.
        let model = unsafe { Model::bind_cuda(&c, &bindings, 0, DType::F32) }.unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut ctx = model.context(n).unwrap();
        ctx.set_stream(driver.stream()).unwrap();

        for compact in [false, true] {
            let what = format!("{name} on the device ({})", if compact { "compact space" } else { "scattered" });
            let got = layers(&driver, &mut ctx, &plan, compact).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_close(&format!("{what}: rows vs the CPU's forward"), &got.rows, &want, 1e-4);
            assert_close(&format!("{what}: last pooling"), &got.pooled_last, &want_last, 1e-4);
        }

        // The whole forward with the host's attention in a callback on device buffers.
        for compact in [false, true] {
            let what = format!("{name}: forward with the device attention callback (compact {compact})");
            let rows = if compact { plan.n_compact_padded } else { n };
            let mut out = driver.upload(&vec![0.0; rows * h]);
            let mut layers_seen = 0;
            let mut attention = |a: &mut DeviceAttentionArgs<'_>| {
                assert_eq!((a.dtype(), a.stream), (DType::F32, driver.stream()));
                assert_eq!(a.cu_seqlens, &plan.cu_seqlens[..]);
                layers_seen += 1;
                attend_on_host(&driver, &c, a);
                Ok(())
            };
            ctx.set_plan(&plan).unwrap();
            if compact {
                ctx.forward_compact_with_device_attention(&plan, out.slice_mut(), &mut attention).unwrap();
                let last = ctx.pool_compact(&plan, out.slice(), Pooling::Last, false).unwrap();
                assert_close(&what, &last, &want_last, 1e-4);
            } else {
                ctx.forward_with_device_attention(&plan, out.slice_mut(), &mut attention).unwrap();
                assert_close(&what, &driver.download(&out), &want, 1e-4);
            }
            assert_eq!(layers_seen, c.num_hidden_layers, "{what}");
        }

        // forward_last on device buffers: each sequence's last row, with the built-in attention
        // and with the host's (in the context's attention space), against the CPU's last rows.
        let n_seqs = plan.cu_seqlens.len() - 1;
        for callback in [false, true] {
            let what = format!("{name}: forward_last on the device (host attention {callback})");
            let mut out = driver.upload(&vec![0.0; n_seqs * h]);
            let mut attention = |a: &mut DeviceAttentionArgs<'_>| {
                attend_on_host(&driver, &c, a);
                Ok(())
            };
            ctx.set_plan(&plan).unwrap();
            let result = if callback {
                ctx.forward_last_with_device_attention(&plan, out.slice_mut(), &mut attention)
            } else {
                ctx.forward_last(&plan, out.slice_mut())
            };
            result.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_close(&what, &driver.download(&out), &want_last, 1e-4);
        }

        // The read-outs on device buffers, and a host slice refused by name.
        let mut out = driver.upload(&vec![0.0; n * h]);
        ctx.set_plan(&plan).unwrap();
        ctx.forward(&plan, out.slice_mut()).unwrap();
        let pooled = ctx.pool(out.slice(), &plan.cu_seqlens, Pooling::Mean, true).unwrap();
        let want_mean = cpu.pool(&want, &plan.cu_seqlens, Pooling::Mean, true).unwrap();
        assert_close(&format!("{name}: device pool"), &pooled, &want_mean, 1e-4);
        let err = ctx.forward(&plan, &mut vec![0.0; n * h]).unwrap_err();
        assert!(err.message.contains("out is a host slice, but the model runs on CUDA device 0"), "{err}");
        drop(ctx);
        drop(model); // before the weights it binds
    }
}

#[test]
fn bind_cuda_config_reads_config_json_before_the_device() {
    // Runs on every machine: config.json's errors come first, under the call's own name.
    let bound = |path: &std::path::Path| unsafe { Model::bind_cuda_config(path, &[], 0, DType::F32) };
    let missing = Fixture::load("gemma2_window").dir.join("no_such_config.json");
    let e = bound(&missing).err().expect("a missing config.json binds nothing");
    assert_eq!(e.status, Status::Io, "{e}");
    assert!(e.message.contains("rmlp_model_bind_cuda_config") && e.message.contains("no_such_config"), "{e}");
    // Gemma 2's per-layer windows and Llama 3's rope_scaling, which the struct cannot carry:
    // past the config, the device (or, with one, the tensors) decides.
    for name in ["gemma2_window", "llama3_rope"] {
        let dir = Fixture::load(name).dir;
        for path in [dir.clone(), dir.join("config.json")] {
            let e = bound(&path).err().expect("no tensors bind nothing");
            let device = radix_mlp::cuda_device_count().map_or(false, |n| n > 0);
            if device {
                assert!(e.status == Status::Model && e.message.contains("missing tensor"), "{name}: {e}");
            } else {
                assert!(matches!(e.status, Status::NoDevice | Status::Unsupported), "{name}: {e}");
            }
        }
    }
}
