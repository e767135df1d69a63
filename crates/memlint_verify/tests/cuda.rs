//! GPU tests of the CUDA backend: kernels and GEMMs against a CPU reference (relative error), the
//! autograd's gradients against a hand-written CPU backward, the tracker against `cuMemGetInfo`,
//! and the scenarios on a small workload (memory figures identical to the simulator's).
//!
//! Without a CUDA driver (CI) each test prints that it was skipped and passes; with a driver the
//! backend must work. `tests/gpu/run.sh` runs them on the GPU machine.

use std::rc::Rc;

use memlint_verify::alloc::Kind;
use memlint_verify::autograd::{Layer, Runtime, Sequential, Storage, Tensor};
use memlint_verify::backend::cuda::{device_count, CudaBackend};
use memlint_verify::backend::sim::{SimBackend, DEFAULT_CAPACITY};
use memlint_verify::backend::{Backend, DType, HostData};
use memlint_verify::scenarios::{self, Workload};
use rand::{Rng, SeedableRng};

fn gpu(test: &str) -> Option<Rc<dyn Backend>> {
    match device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) => {
            println!("{test}: skipped, no GPU (the CUDA driver reports none)");
            return None;
        }
        Err(e) => {
            println!("{test}: skipped, no GPU ({e})");
            return None;
        }
    }
    // A driver and a GPU are present: from here on the backend must work.
    match CudaBackend::new(0) {
        Ok(b) => Some(Rc::new(b)),
        Err(e) => panic!("{test}: a GPU is present but the CUDA backend failed: {e}"),
    }
}

fn rand_vec(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| r.random_range(-1.0f32..1.0) * scale).collect()
}

fn upload(rt: &Runtime, rows: usize, cols: usize, dtype: DType, v: &[f32]) -> Rc<Storage> {
    let s = rt.empty(rows, cols, dtype, Kind::Output).expect("alloc");
    rt.dev.upload(s.addr(), dtype, HostData::F32(v)).expect("upload");
    s
}

/// Values as they are once stored in `dtype` (fp16 rounds), so the CPU reference sees the same inputs.
fn q(v: &[f32], dtype: DType) -> Vec<f32> {
    match dtype {
        DType::Fp16 => v.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect(),
        _ => v.to_vec(),
    }
}

fn rel_err(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    let num: f64 = got.iter().zip(want).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
    let den: f64 = want.iter().map(|b| (*b as f64).powi(2)).sum();
    (num / den.max(1e-30)).sqrt()
}

fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::Fp16 => 2e-3,
        _ => 1e-5,
    }
}

/// y = x · wᵀ + b on the CPU (f64 accumulation).
fn cpu_linear(x: &[f32], w: &[f32], b: &[f32], rows: usize, inf: usize, outf: usize) -> Vec<f32> {
    let mut y = vec![0f32; rows * outf];
    for r in 0..rows {
        for o in 0..outf {
            let mut acc = b[o] as f64;
            for i in 0..inf {
                acc += x[r * inf + i] as f64 * w[o * inf + i] as f64;
            }
            y[r * outf + o] = acc as f32;
        }
    }
    y
}

#[test]
fn linear_relu_and_cross_entropy_match_the_cpu() {
    let Some(dev) = gpu("linear_relu_and_cross_entropy_match_the_cpu") else { return };
    let rt = Runtime::new(dev.clone()).expect("runtime");
    let (rows, inf, outf, classes) = (64, 96, 80, 10);
    for dtype in [DType::Fp32, DType::Fp16] {
        let xv = q(&rand_vec(rows * inf, 1, 1.0), dtype);
        let wv = q(&rand_vec(outf * inf, 2, 0.1), dtype);
        let bv = q(&rand_vec(outf, 3, 0.1), dtype);
        let x = Tensor { data: upload(&rt, rows, inf, dtype, &xv), grad_fn: None };
        let w = rt.param(outf, inf, inf, dtype, 5).expect("param");
        let b = rt.param(1, outf, inf, dtype, 6).expect("param");
        dev.upload(w.data.addr(), dtype, HostData::F32(&wv)).expect("upload");
        dev.upload(b.data.addr(), dtype, HostData::F32(&bv)).expect("upload");

        let y = rt.linear(&x, &w, &b, false).expect("linear");
        let got = rt.to_host(&y.data).expect("download");
        let want = cpu_linear(&xv, &wv, &bv, rows, inf, outf);
        let e = rel_err(&got, &want);
        println!("{dtype:?} linear forward: relative error {e:.2e}");
        assert!(e < tol(dtype), "{dtype:?} linear: {e}");

        let r = rt.relu(&y).expect("relu");
        let got = rt.to_host(&r.data).expect("download");
        let yv = rt.to_host(&y.data).expect("download");
        let want: Vec<f32> = yv.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(got, want, "{dtype:?} relu is exact");

        // Cross-entropy on a [rows, classes] slice of logits.
        let lv = q(&rand_vec(rows * classes, 9, 3.0), dtype);
        let logits = Tensor { data: upload(&rt, rows, classes, dtype, &lv), grad_fn: None };
        let tv: Vec<i64> = (0..rows as i64).map(|i| (i * 7) % classes as i64).collect();
        let targets = rt.empty(rows, 1, DType::I64, Kind::Output).expect("alloc");
        dev.upload(targets.addr(), DType::I64, HostData::I64(&tv)).expect("upload");
        let loss = rt.cross_entropy(&logits, &targets).expect("ce");
        let mut want_loss = 0f64;
        for r in 0..rows {
            let row = &lv[r * classes..(r + 1) * classes];
            let m = row.iter().cloned().fold(f32::MIN, f32::max) as f64;
            let lse = m + row.iter().map(|v| (*v as f64 - m).exp()).sum::<f64>().ln();
            want_loss += lse - row[tv[r] as usize] as f64;
        }
        want_loss /= rows as f64;
        let got_loss = rt.item(&loss).expect("item") as f64;
        let e = (got_loss - want_loss).abs() / want_loss.abs();
        println!("{dtype:?} cross-entropy: {got_loss:.6} vs {want_loss:.6} (relative error {e:.2e})");
        assert!(e < tol(dtype).max(1e-6), "{dtype:?} ce: {got_loss} vs {want_loss}");
    }
}

#[test]
fn autograd_gradients_match_a_cpu_backward() {
    let Some(dev) = gpu("autograd_gradients_match_a_cpu_backward") else { return };
    let rt = Runtime::new(dev.clone()).expect("runtime");
    let (rows, width, classes) = (32, 64, 10);
    for dtype in [DType::Fp32, DType::Fp16] {
        let model = Sequential::mlp(&rt, width, 1, Some(classes), dtype, 77).expect("model");
        let xv = q(&rand_vec(rows * width, 4, 1.0), dtype);
        let x = Tensor { data: upload(&rt, rows, width, dtype, &xv), grad_fn: None };
        let tv: Vec<i64> = (0..rows as i64).map(|i| (i * 3) % classes as i64).collect();
        let targets = rt.empty(rows, 1, DType::I64, Kind::Output).expect("alloc");
        dev.upload(targets.addr(), DType::I64, HostData::I64(&tv)).expect("upload");
        let out = model.forward(&rt, &x, false).expect("forward");
        let loss = rt.cross_entropy(&out, &targets).expect("ce");
        rt.backward(&loss, false).expect("backward");

        // The same network on the CPU: Linear(w1, b1) → ReLU → Linear(w2, b2) → cross-entropy.
        let Layer::Linear { w: w1, b: b1 } = &model.layers[0] else { panic!("layer 0") };
        let Layer::Linear { w: w2, b: b2 } = &model.layers[2] else { panic!("layer 2") };
        let h = |s: &Storage| rt.to_host(s).expect("download");
        let (w1v, b1v, w2v, b2v) = (h(&w1.data), h(&b1.data), h(&w2.data), h(&b2.data));
        let z1 = cpu_linear(&xv, &w1v, &b1v, rows, width, width);
        let r1: Vec<f32> = q(&z1.iter().map(|v| v.max(0.0)).collect::<Vec<_>>(), dtype);
        let logits = cpu_linear(&r1, &w2v, &b2v, rows, width, classes);
        let mut dl = vec![0f32; rows * classes];
        for r in 0..rows {
            let row = &logits[r * classes..(r + 1) * classes];
            let m = row.iter().cloned().fold(f32::MIN, f32::max);
            let s: f32 = row.iter().map(|v| (v - m).exp()).sum();
            for c in 0..classes {
                let p = (row[c] - m).exp() / s;
                dl[r * classes + c] = (p - if tv[r] as usize == c { 1.0 } else { 0.0 }) / rows as f32;
            }
        }
        let mut dw2 = vec![0f32; classes * width];
        let mut db2 = vec![0f32; classes];
        let mut dr1 = vec![0f32; rows * width];
        for r in 0..rows {
            for c in 0..classes {
                let g = dl[r * classes + c];
                db2[c] += g;
                for i in 0..width {
                    dw2[c * width + i] += g * r1[r * width + i];
                    dr1[r * width + i] += g * w2v[c * width + i];
                }
            }
        }
        let dz1: Vec<f32> = dr1.iter().zip(&z1).map(|(g, z)| if *z > 0.0 { *g } else { 0.0 }).collect();
        let mut dw1 = vec![0f32; width * width];
        let mut db1 = vec![0f32; width];
        for r in 0..rows {
            for o in 0..width {
                let g = dz1[r * width + o];
                db1[o] += g;
                for i in 0..width {
                    dw1[o * width + i] += g * xv[r * width + i];
                }
            }
        }
        let grad = |p: &memlint_verify::autograd::Param| h(p.grad.borrow().as_ref().expect("gradient allocated by backward"));
        // fp16 gradients go through fp16 intermediates: a looser bound.
        let t = if dtype == DType::Fp16 { 2e-2 } else { 1e-4 };
        for (name, got, want) in [("w2", grad(w2), dw2), ("b2", grad(b2), db2), ("w1", grad(w1), dw1), ("b1", grad(b1), db1)] {
            let e = rel_err(&got, &want);
            println!("{dtype:?} grad {name}: relative error {e:.2e}");
            assert!(e < t, "{dtype:?} {name}: {e}");
        }
        // backward freed the saved tensors: a second backward is an error, not a crash.
        assert!(rt.backward(&loss, false).is_err());
        // SGD: p -= lr * grad.
        let before = h(&w2.data);
        rt.sgd_step(&model.params(), 0.5).expect("sgd");
        let after = h(&w2.data);
        let want: Vec<f32> = before.iter().zip(grad(w2)).map(|(p, g)| p - 0.5 * g).collect();
        assert!(rel_err(&after, &want) < tol(dtype), "sgd");
    }
}

#[test]
fn casts_scaling_and_counters_match_the_cpu() {
    let Some(dev) = gpu("casts_scaling_and_counters_match_the_cpu") else { return };
    let rt = Runtime::new(dev.clone()).expect("runtime");
    let n = 10_000;
    // Values down to fp16's subnormal range, so the cast's underflow to zero is exercised.
    let v: Vec<f32> = rand_vec(n, 12, 1.0).iter().enumerate().map(|(i, x)| x * 10f32.powi(-((i % 10) as i32))).collect();
    let x32 = upload(&rt, 1, n, DType::Fp32, &v);
    let x16 = rt.empty(1, n, DType::Fp16, Kind::Output).expect("alloc");
    dev.cast(DType::Fp32, DType::Fp16, x32.addr(), x16.addr(), n, 1.0).expect("cast");
    let got = rt.to_host(&x16).expect("download");
    assert_eq!(got, q(&v, DType::Fp16), "fp32 -> fp16 rounds like half::f16::from_f32");
    let want_zeros = got.iter().filter(|x| **x == 0.0).count() as u64;
    assert!(want_zeros > 0, "some values underflow in fp16");
    let counter = rt.empty(1, 2, DType::Fp32, Kind::Output).expect("alloc");
    dev.fill(DType::Fp32, counter.addr(), 2, 0.0).expect("fill");
    dev.count_zeros(DType::Fp16, x16.addr(), n, counter.addr()).expect("count");
    assert_eq!(dev.read_u64(counter.addr()).expect("read"), want_zeros);

    // Scaled cast back to fp32 and GradScaler's unscale with the inf check.
    let y = rt.empty(1, n, DType::Fp32, Kind::Output).expect("alloc");
    dev.cast(DType::Fp16, DType::Fp32, x16.addr(), y.addr(), n, 8.0).expect("cast");
    let found = rt.zeros_scalar(DType::Fp32).expect("alloc");
    dev.unscale_check(y.addr(), n, 0.125, found.data.addr()).expect("unscale");
    assert_eq!(rt.to_host(&y).expect("download"), got, "×8 then ×1/8 is exact");
    assert_eq!(rt.item(&found).expect("item"), 0.0);
    let inf = upload(&rt, 1, 3, DType::Fp32, &[1.0, f32::INFINITY, 2.0]);
    dev.unscale_check(inf.addr(), 3, 0.5, found.data.addr()).expect("unscale");
    assert_eq!(rt.item(&found).expect("item"), 1.0, "an inf is found");

    // Initialisers: standard normal and uniform in ±bound.
    let big = rt.randn(1000, 1000, DType::Fp32, 3).expect("randn");
    let s = rt.to_host(&big.data).expect("download");
    let mean = s.iter().map(|x| *x as f64).sum::<f64>() / s.len() as f64;
    let var = s.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / s.len() as f64;
    println!("randn: mean {mean:.4}, variance {var:.4}");
    assert!(mean.abs() < 0.01 && (var - 1.0).abs() < 0.01, "mean {mean} var {var}");
    let p = rt.param(1000, 100, 100, DType::Fp32, 4).expect("param");
    let s = rt.to_host(&p.data).expect("download");
    assert!(s.iter().all(|x| x.abs() <= 0.1), "within 1/sqrt(fan_in)");
    let var = s.iter().map(|x| (*x as f64).powi(2)).sum::<f64>() / s.len() as f64;
    assert!((var - 0.01 / 3.0).abs() < 1e-4, "uniform variance bound²/3: {var}");
}

#[test]
fn tracker_matches_cu_mem_get_info() {
    let Some(dev) = gpu("tracker_matches_cu_mem_get_info") else { return };
    let rt = Runtime::new(dev.clone()).expect("runtime");
    dev.synchronize().expect("sync");
    let (free0, _) = dev.mem_info().expect("mem info");
    let reserved0 = rt.stats().reserved;
    let mut held = Vec::new();
    // Small-pool, large-pool and own-segment sizes.
    for (i, bytes) in [1usize << 10, 300 << 10, 5 << 20, 8 << 20, 8 << 20, 64 << 20, 130 << 20].iter().enumerate() {
        held.push(rt.empty(1, *bytes / 4, DType::Fp32, Kind::Output).expect("alloc"));
        dev.synchronize().expect("sync");
        let (free, _) = dev.mem_info().expect("mem info");
        let driver = free0 as i64 - free as i64;
        let tracker = rt.stats().reserved as i64 - reserved0 as i64;
        println!("after {} allocations: tracker reserved +{tracker} B, driver used +{driver} B", i + 1);
        assert!((driver - tracker).abs() <= 2 << 20, "tracker {tracker} vs cuMemGetInfo {driver}");
    }
    drop(held);
    rt.empty_cache().expect("empty cache");
    let (free, _) = dev.mem_info().expect("mem info");
    assert_eq!(rt.stats().reserved, reserved0);
    assert!((free0 as i64 - free as i64).abs() <= 2 << 20, "empty_cache returned the memory to the driver");
}

#[test]
fn scenarios_on_the_gpu_allocate_exactly_what_the_simulator_predicts() {
    let Some(dev) = gpu("scenarios_on_the_gpu_allocate_exactly_what_the_simulator_predicts") else { return };
    let wl = Workload { layers: 3, hidden: 512, batch: 128, iters: 3, dtype: DType::Fp32, classes: 10 };
    let defs = scenarios::all();
    let gpu_rows = memlint_verify::run_scenarios(dev, &wl, &defs, |_| {}).expect("runtime");
    let sim: Rc<dyn Backend> = Rc::new(SimBackend::new(DEFAULT_CAPACITY));
    let sim_rows = memlint_verify::run_scenarios(sim, &wl, &defs, |_| {}).expect("runtime");
    for (g, s) in gpu_rows.iter().zip(&sim_rows) {
        assert!(g.error.is_none(), "{} {}: {:?}", g.code, g.variant, g.error);
        assert_eq!((g.peak_bytes_bad, g.peak_bytes_fixed, g.held_bytes_bad, g.held_bytes_fixed), (s.peak_bytes_bad, s.peak_bytes_fixed, s.held_bytes_bad, s.held_bytes_fixed), "{} {}", g.code, g.variant);
        assert!(g.step_ms_bad.is_some() && g.step_ms_fixed.is_some());
        if let (Some(t), Some(d)) = (g.tracker_reserved_delta_bytes, g.driver_used_delta_bytes) {
            assert!((t - d).abs() <= 4 << 20, "{} {}: tracker {t} vs driver {d}", g.code, g.variant);
        }
    }
    let m3 = gpu_rows.iter().find(|r| r.code == "MEM003").expect("MEM003");
    let (ub, uf) = (m3.underflow_fraction_bad.expect("bad fraction"), m3.underflow_fraction_fixed.expect("fixed fraction"));
    println!("MEM003 underflow: bad {ub:.4}, fixed {uf:.4}");
    assert!((0.0..=1.0).contains(&ub) && (0.0..=1.0).contains(&uf));
    assert!(ub > uf, "loss scaling keeps gradients from underflowing");
}

#[test]
fn mse_loss_argmax_and_bool_sum_match_the_cpu() {
    let Some(dev) = gpu("mse_loss_argmax_and_bool_sum_match_the_cpu") else { return };
    let rt = Runtime::new(dev.clone()).expect("runtime");
    let (rows, cols) = (64, 96);
    let (av, bv) = (rand_vec(rows * cols, 21, 1.0), rand_vec(rows * cols, 22, 1.0));
    // mse_loss forward and both input gradients, against the formula on the host.
    let a = Tensor { data: upload(&rt, rows, cols, DType::Fp32, &av), grad_fn: None };
    let b = Tensor { data: upload(&rt, rows, cols, DType::Fp32, &bv), grad_fn: None };
    let loss = rt.mse_loss(&a, &b).expect("mse");
    let want: f64 = av.iter().zip(&bv).map(|(x, y)| ((x - y) as f64).powi(2)).sum::<f64>() / (rows * cols) as f64;
    let got = rt.item(&loss).expect("item") as f64;
    println!("mse_loss: {got} vs {want}");
    assert!((got - want).abs() / want < 1e-5);
    let gout = rt.empty(rows, cols, DType::Fp32, Kind::Output).expect("alloc");
    let one = upload(&rt, 1, 1, DType::Fp32, &[1.0]);
    dev.mse_bwd(DType::Fp32, a.data.addr(), b.data.addr(), one.addr(), gout.addr(), rows * cols, 2.0 / (rows * cols) as f32).expect("bwd");
    let g = rt.to_host(&gout).expect("download");
    let want_g: Vec<f32> = av.iter().zip(&bv).map(|(x, y)| 2.0 * (x - y) / (rows * cols) as f32).collect();
    assert!(rel_err(&g, &want_g) < 1e-6, "mse_loss_backward: {}", rel_err(&g, &want_g));
    // (out.argmax(1) == y).sum()
    let am = rt.argmax_rows(&a).expect("argmax");
    let got_idx = dev.download(am.addr(), DType::I64, rows).expect("download");
    let want_idx: Vec<f32> = av.chunks(cols).map(|r| r.iter().enumerate().fold((0, f32::MIN), |(bi, bv), (i, v)| if *v > bv { (i, *v) } else { (bi, bv) }).0 as f32).collect();
    assert_eq!(got_idx, want_idx);
    let targets: Vec<i64> = (0..rows as i64).map(|i| if i % 3 == 0 { want_idx[i as usize] as i64 } else { cols as i64 + 1 }).collect();
    let y = rt.upload_targets(&targets).expect("targets");
    let eq = rt.eq(&am, &y).expect("eq");
    let s = rt.sum_bool(&eq).expect("sum");
    let count = dev.download(s.addr(), DType::I64, 1).expect("download")[0];
    assert_eq!(count as usize, rows.div_ceil(3), "one row in three matches");
}

// ---- MEM007 on several GPUs ----

use memlint_verify::fabric::{CudaFabric, Fabric, SimFabric};
use memlint_verify::parallel::{self, Optimizer, Setup, TORCH_EXTRA_WORKSPACES};

/// Two GPUs and NCCL, or a message saying why the test is skipped.
fn two_gpus(test: &str) -> bool {
    match device_count() {
        Ok(n) if n >= 2 => {}
        Ok(n) => {
            println!("{test}: skipped, {n} GPU(s) visible (MEM007 needs 2)");
            return false;
        }
        Err(e) => {
            println!("{test}: skipped, no GPU ({e})");
            return false;
        }
    }
    // Two GPUs are present: from here on NCCL must load.
    if let Err(e) = memlint_verify::backend::nccl::probe() {
        panic!("{test}: 2 GPUs are present but NCCL could not be loaded: {e}");
    }
    true
}

fn cuda_runtime(i: usize) -> Result<Runtime, String> {
    let b = CudaBackend::new(i)?;
    Runtime::with_workspaces(Rc::new(b), TORCH_EXTRA_WORKSPACES).map_err(|e| e.to_string())
}

fn sim_runtime(_i: usize) -> Result<Runtime, String> {
    Runtime::with_workspaces(Rc::new(SimBackend::new(DEFAULT_CAPACITY)), TORCH_EXTRA_WORKSPACES).map_err(|e| e.to_string())
}

#[test]
fn mem007_peer_copies_broadcast_and_reduce_move_the_right_values() {
    if !two_gpus("mem007_peer_copies_broadcast_and_reduce_move_the_right_values") {
        return;
    }
    let fab = CudaFabric::new(2).expect("fabric");
    let rts: Vec<Runtime> = (0..2).map(|i| cuda_runtime(i).expect("runtime")).collect();
    let n = 1000;
    let a = rand_vec(n, 1, 1.0);
    let b = rand_vec(n, 2, 1.0);
    let a0 = upload(&rts[0], 1, n, DType::Fp32, &a);
    let b1 = upload(&rts[1], 1, n, DType::Fp32, &b);
    // copy: device 1 -> device 0
    let c0 = rts[0].empty(1, n, DType::Fp32, Kind::Output).unwrap();
    fab.copy(&rts, 0, c0.addr(), 1, b1.addr(), n * 4).expect("copy");
    assert_eq!(rts[0].to_host(&c0).unwrap(), b);
    // broadcast from device 0 into device 1's buffer
    let d1 = rts[1].empty(1, n, DType::Fp32, Kind::Output).unwrap();
    fab.broadcast(&rts, &[a0.addr(), d1.addr()], n, DType::Fp32).expect("broadcast");
    assert_eq!(rts[1].to_host(&d1).unwrap(), a);
    // reduce onto device 0
    let r0 = rts[0].empty(1, n, DType::Fp32, Kind::Output).unwrap();
    fab.reduce(&rts, &[a0.addr(), b1.addr()], r0.addr(), n, DType::Fp32).expect("reduce");
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert!(rel_err(&rts[0].to_host(&r0).unwrap(), &want) < 1e-7);
}

/// Relative error of each parameter's update (after minus before) against the reference's.
fn update_error(before: &[Vec<f32>], want: &[Vec<f32>], got: &[Vec<f32>]) -> f64 {
    let d = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<f32>>();
    before.iter().zip(want).zip(got).map(|((b, w), g)| rel_err(&d(g, b), &d(w, b))).fold(0.0, f64::max)
}

#[test]
fn mem007_data_parallel_and_ddp_train_as_one_device_does() {
    if !two_gpus("mem007_data_parallel_and_ddp_train_as_one_device_does") {
        return;
    }
    let wl = Workload { layers: 2, hidden: 256, batch: 64, iters: 3, dtype: DType::Fp32, classes: 10 };
    let fab = CudaFabric::new(2).expect("fabric");
    let setup = Setup { devices: 2, make: &cuda_runtime, fabric: &fab, estimated: false };
    for opt in [Optimizer::Sgd, Optimizer::SgdMomentum] {
        let rt = cuda_runtime(0).expect("runtime");
        let (before, want) = parallel::single_device(&rt, &wl, opt, parallel::WARMUP_STEPS + wl.iters).expect("reference");
        drop(rt);
        let dp = parallel::run_data_parallel(&setup, &wl, opt, true).expect("DataParallel");
        assert!(dp.report.error.is_none(), "{:?}", dp.report.error);
        let e = update_error(&before, &want, &dp.params.expect("params"));
        println!("{opt:?}: DataParallel's parameter updates vs one device: relative error {e:.2e}");
        assert!(e < 1e-3, "{e}");
        for bucket_view in [false, true] {
            let ddp = parallel::run_ddp(&setup, &wl, opt, bucket_view, true).expect("DDP");
            assert!(ddp.report.error.is_none(), "{:?}", ddp.report.error);
            let e = update_error(&before, &want, &ddp.params.expect("params"));
            println!("{opt:?}: DDP (gradient_as_bucket_view={bucket_view}) rank 0's updates vs one device: relative error {e:.2e}");
            assert!(e < 1e-3, "{e}");
        }
    }
}

#[test]
fn mem007_gpu_figures_equal_the_simulator() {
    if !two_gpus("mem007_gpu_figures_equal_the_simulator") {
        return;
    }
    let wl = Workload { layers: 3, hidden: 1024, batch: 128, iters: 2, dtype: DType::Fp32, classes: 10 };
    let fab = CudaFabric::new(2).expect("fabric");
    let gpu = parallel::run(&Setup { devices: 2, make: &cuda_runtime, fabric: &fab, estimated: false }, &wl, &mut |_| {}).expect("gpu run");
    let sim = parallel::run(&Setup { devices: 2, make: &sim_runtime, fabric: &SimFabric, estimated: true }, &wl, &mut |_| {}).expect("sim run");
    assert!(gpu.error.is_none() && sim.error.is_none(), "{:?} {:?}", gpu.error, sim.error);
    for (g, s) in gpu.runs.iter().zip(&sim.runs) {
        for (lg, ls, what) in [(&g.data_parallel, &s.data_parallel, "DataParallel"), (&g.ddp, &s.ddp, "DDP"), (&g.ddp_bucket_view, &s.ddp_bucket_view, "DDP bucket view")] {
            for (dg, ds) in lg.devices.iter().zip(&ls.devices) {
                assert_eq!((dg.peak_bytes, dg.held_bytes), (ds.peak_bytes, ds.held_bytes), "{:?} {what} device {}", g.optimizer, dg.index);
            }
            assert!(lg.step_ms.is_some_and(|t| t > 0.0), "{what}: a step time on GPUs");
        }
    }
    println!("{}", parallel::render_text(&gpu));
}
