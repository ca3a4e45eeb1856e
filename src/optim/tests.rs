//! The fused optimizer against the same updates run op by op, and the schedulers against
//! MXNet 1.9.1's rates (`tests/fixtures/optim/schedulers.json`, made by the script beside it).

use super::{FusedOptimizer, LrScheduler, ParamKey};
use crate::imperative::invoke;
use crate::kvstore::StoreUpdater;
use crate::ndarray::NDArray;
use crate::op::testutil::{array, f32a, f32s, values};
use crate::op::{self, Attrs};
use half::f16;
use std::collections::HashMap;

fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn copy(a: &NDArray) -> NDArray {
    let c = NDArray::empty(a.shape(), a.dtype(), a.context()).unwrap();
    c.write_bytes(a.to_bytes().unwrap()).unwrap();
    c
}

/// Runs op `name` in place on `ins` (weight first) with `attrs`.
fn run_in_place(name: &str, attrs: &[(&str, String)], ins: &[NDArray]) {
    let a: Attrs = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let op = op::find(name).unwrap().build(&a).unwrap();
    invoke(&op, ins, Some(vec![ins[0].clone()]), None, false).unwrap();
}

#[test]
fn schedulers_match_mxnet() {
    let text = include_str!("../../tests/fixtures/optim/schedulers.json");
    let cases: serde_json::Value = serde_json::from_str(text).unwrap();
    for case in cases.as_array().unwrap() {
        let desc = case["scheduler"].to_string();
        let mut s = LrScheduler::from_json(&desc).unwrap();
        let steps = case["steps"].as_array().unwrap();
        let rates = case["rates"].as_array().unwrap();
        for (n, want) in steps.iter().zip(rates) {
            let (n, want) = (n.as_i64().unwrap(), want.as_f64().unwrap());
            let got = s.lr(n);
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1e-300),
                "{desc} at {n}: got {got}, want {want}"
            );
            // The state written out and read back goes on the same way.
            let again = LrScheduler::from_json(&s.to_json()).unwrap();
            assert_eq!(again, s, "{desc}");
        }
    }
    assert!(LrScheduler::from_json(r#"{"type": "FactorScheduler", "step": 0}"#).is_err());
    assert!(LrScheduler::from_json(r#"{"type": "Nope"}"#).is_err());
    assert!(LrScheduler::from_json(r#"{"type": "MultiFactorScheduler", "step": [3, 2]}"#).is_err());
}

#[test]
fn sgd_momentum_with_multipliers_equals_op_by_op() {
    let opt = FusedOptimizer::new(
        "SGD",
        &params(&[
            ("learning_rate", "0.1"),
            ("momentum", "0.9"),
            ("wd", "0.01"),
            ("rescale_grad", "0.5"),
            ("clip_gradient", "2.0"),
            ("idx2name", r#"[[0, "fc_weight"], [1, "fc_bias"]]"#),
            ("lr_mult", r#"[["fc_bias", 2.0], [0, 0.5]]"#),
        ]),
    )
    .unwrap();
    let w0 = f32a(&[4], &[1., -2., 3., 0.5]);
    let g = f32a(&[4], &[0.5, 4., -1., 0.25]);
    for (idx, lr, wd) in [(0, 0.05, 0.01), (1, 0.2, 0.0)] {
        let key = ParamKey::Int(idx);
        let w = copy(&w0);
        let st = opt.create_state(&key, &w).unwrap();
        assert_eq!(st.len(), 1);
        let (rw, rm) = (copy(&w0), f32a(&[4], &[0.; 4]));
        for _ in 0..3 {
            opt.update(&key, &w, &g, &st, 0).unwrap();
            let attrs = [
                ("lr", lr.to_string()),
                ("wd", wd.to_string()),
                ("momentum", "0.9".into()),
                ("rescale_grad", "0.5".into()),
                ("clip_gradient", "2".into()),
            ];
            run_in_place(
                "sgd_mom_update",
                &attrs,
                &[rw.clone(), g.clone(), rm.clone()],
            );
        }
        assert_eq!(f32s(&w), f32s(&rw), "weight of key {idx}");
        assert_eq!(f32s(&st[0]), f32s(&rm), "momentum of key {idx}");
    }
    assert_eq!(opt.num_update(), 3);
}

#[test]
fn adam_counts_each_key_and_follows_the_scheduler() {
    let sched = r#"{"type": "FactorScheduler", "step": 2, "factor": 0.5, "base_lr": 0.1}"#;
    let opt = FusedOptimizer::new(
        "adam",
        &params(&[("lr_scheduler", sched), ("learning_rate", "None")]),
    )
    .unwrap();
    assert!(opt.set_learning_rate(0.3).is_err());
    let g = array::<f64>(&[3], &[0.1, -0.2, 0.3]);
    let mut s = LrScheduler::from_json(sched).unwrap();
    let keys = [ParamKey::Name("a".into()), ParamKey::Name("b".into())];
    let w: Vec<NDArray> = keys
        .iter()
        .map(|_| array::<f64>(&[3], &[1., 2., 3.]))
        .collect();
    let st: Vec<Vec<NDArray>> = keys
        .iter()
        .zip(&w)
        .map(|(k, w)| opt.create_state(k, w).unwrap())
        .collect();
    let refs: Vec<Vec<NDArray>> = w
        .iter()
        .map(|w| {
            let z = || array::<f64>(&[3], &[0.; 3]);
            vec![copy(w), g.clone(), z(), z()]
        })
        .collect();
    let mut counts = [0i64, 0];
    let mut num_update = 0;
    for k in [0, 0, 1, 0, 1, 0] {
        opt.update(&keys[k], &w[k], &g, &st[k], 3).unwrap();
        counts[k] += 1;
        num_update = num_update.max(counts[k]);
        let t = counts[k] as f64;
        let lr = s.lr(num_update) * ((1.0 - 0.999f64.powf(t)).sqrt() / (1.0 - 0.9f64.powf(t)));
        run_in_place("adam_update", &[("lr", format!("{lr:?}"))], &refs[k]);
    }
    for k in 0..2 {
        assert_eq!(values::<f64>(&w[k]), values::<f64>(&refs[k][0]));
        assert_eq!(values::<f64>(&st[k][1]), values::<f64>(&refs[k][3]));
    }
    let counts = opt.counts();
    assert_eq!(counts[&0][&keys[0]], 4);
    assert_eq!(counts[&0][&keys[1]], 2);
    assert_eq!(opt.num_update(), 4);
    assert!(opt.lr_scheduler_json().unwrap().contains("\"count\":2"));
}

#[test]
fn counts_start_at_begin_num_update_and_restore() {
    let opt = FusedOptimizer::new(
        "nag",
        &params(&[("begin_num_update", "10"), ("momentum", "0.5")]),
    )
    .unwrap();
    let w = f32a(&[2], &[1., 2.]);
    let g = f32a(&[2], &[1., 1.]);
    let st = opt.create_state(&ParamKey::Int(7), &w).unwrap();
    opt.update(&ParamKey::Int(7), &w, &g, &st, 0).unwrap();
    assert_eq!(opt.num_update(), 11);
    let saved = opt.counts();
    let other = FusedOptimizer::new("nag", &params(&[("momentum", "0.5")])).unwrap();
    other.set_counts(saved.clone(), None);
    assert_eq!(other.num_update(), 11);
    assert_eq!(other.counts(), saved);
    // Wrong number of states, unknown optimizer: errors, not panics.
    assert!(opt.update(&ParamKey::Int(7), &w, &g, &[], 0).is_err());
    assert!(FusedOptimizer::new("lbsgd", &HashMap::new()).is_err());
    assert!(FusedOptimizer::new("sgd", &params(&[("wd_mult", "{bad")])).is_err());
}

#[test]
fn multi_precision_keeps_float32_copies() {
    let w16 = || {
        array::<f16>(
            &[3],
            &[f16::from_f32(1.0), f16::from_f32(-0.5), f16::from_f32(0.25)],
        )
    };
    let g16 = array::<f16>(&[3], &[f16::from_f32(0.5); 3]);
    for (name, n_states, w32_at) in [("sgd", 2, 1), ("adam", 3, 0)] {
        let p = params(&[
            ("multi_precision", "True"),
            ("momentum", "0.9"),
            ("learning_rate", "0.1"),
        ]);
        let opt = FusedOptimizer::new(name, &p).unwrap();
        let key = ParamKey::Int(0);
        let w = w16();
        let st = opt.create_state(&key, &w).unwrap();
        assert_eq!(st.len(), n_states, "{name}");
        assert!(
            st.iter().all(|s| s.dtype() == crate::dtype::DType::F32),
            "{name}"
        );
        for _ in 0..2 {
            opt.update(&key, &w, &g16, &st, 0).unwrap();
        }
        let master = f32s(&st[w32_at]);
        let got: Vec<f32> = values::<f16>(&w).iter().map(|v| v.to_f32()).collect();
        let want: Vec<f32> = master.iter().map(|v| f16::from_f32(*v).to_f32()).collect();
        assert_eq!(got, want, "{name}");
        assert!(master[0] < 1.0 && master[0] > 0.5, "{name}: {master:?}");
    }
}

#[test]
fn every_update_builds_through_the_registry() {
    use super::config::Config;
    use super::ops::{op_call, OpCache, Rates};
    let r = Rates {
        lr: 0.1,
        wd: 0.01,
        t: 3,
        rescale_grad: 0.5,
    };
    for name in [
        "sgd", "nag", "signum", "adam", "adagrad", "rmsprop", "adadelta", "ftrl",
    ] {
        for (centered, agg) in [("False", "4"), ("True", "0")] {
            let p = params(&[
                ("clip_gradient", "0.5"),
                ("clip_weights", "2"),
                ("centered", centered),
                ("aggregate_num", agg),
                ("momentum", "0.9"),
            ]);
            let cfg = Config::parse(name, &p).unwrap();
            for (has_mom, mp) in [(false, false), (true, false), (false, true), (true, true)] {
                let call = op_call(&cfg, &r, has_mom, mp);
                if let Err(e) = call.build() {
                    panic!(
                        "{name} ({has_mom}, {mp}): {} does not build: {e}",
                        call.name
                    );
                }
            }
        }
    }
    // An operator built lately is reused for the same attributes.
    let cfg = Config::parse("sgd", &params(&[("momentum", "0.9")])).unwrap();
    let cache = OpCache::default();
    let a = cache.get(op_call(&cfg, &r, true, false)).unwrap();
    let r2 = Rates { lr: 0.2, ..r };
    let c = cache.get(op_call(&cfg, &r2, true, false)).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&a, &c));
    let b = cache.get(op_call(&cfg, &r, true, false)).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    let zero = Rates { lr: -0.0, ..r };
    let d = cache.get(op_call(&cfg, &zero, true, false)).unwrap();
    let e = cache
        .get(op_call(&cfg, &Rates { lr: 0.0, ..r }, true, false))
        .unwrap();
    assert!(!std::sync::Arc::ptr_eq(&d, &e));
}

#[test]
fn counting_and_rates_for_a_bound_python_optimizer() {
    let sched = r#"{"type": "FactorScheduler", "step": 1, "factor": 0.5, "base_lr": 1.0}"#;
    let opt = FusedOptimizer::new(
        "sgd",
        &params(&[
            ("lr_scheduler", sched),
            ("wd", "0.1"),
            ("idx2name", r#"[[0, "a_weight"], [1, "a_bias"]]"#),
            ("lr_mult", r#"[["a_bias", 2.0]]"#),
        ]),
    )
    .unwrap();
    let (k0, k1) = (ParamKey::Int(0), ParamKey::Int(1));
    assert_eq!(opt.count_update(&k0, 0), 1);
    assert_eq!(opt.count_update(&k0, 1), 1);
    assert_eq!(opt.count_update(&k0, 0), 2);
    assert_eq!(opt.num_update(), 2);
    assert_eq!(opt.lrs(&[k0.clone(), k1.clone()]), vec![0.5, 1.0]);
    assert_eq!(opt.wds(&[k0.clone(), k1.clone()]), vec![0.1, 0.0]);
    assert_eq!(opt.scheduler_rate(5), Some(0.5f64.powi(4)));
    // New settings keep the counts and the schedule.
    opt.reconfigure(&params(&[("wd", "0.3")])).unwrap();
    assert_eq!(opt.wds(std::slice::from_ref(&k1)), vec![0.3]);
    assert_eq!(opt.num_update(), 2);
    assert!(opt.lr_scheduler_json().unwrap().contains("\"count\":4"));
    assert!(opt.set_lr_scheduler_json("{").is_err());
    opt.set_lr(0.7);
    assert_eq!(opt.lr(), 0.7);
    opt.set_rescale_grad(0.25);
    assert_eq!(opt.rescale_grad(), 0.25);
}

#[test]
fn host_updates_equal_engine_updates() {
    use super::HostArray;
    use crate::dtype::DType;
    let w0 = [0.5f32, -1.25, 2.0, 0.125, -0.75];
    let g = [0.25f32, -0.5, 1.5, -2.0, 0.0625];
    let kinds = [
        ("sgd", vec![("momentum", "0.9"), ("wd", "0.01")]),
        ("sgd", vec![("clip_gradient", "1.0")]),
        ("nag", vec![("momentum", "0.9")]),
        ("adam", vec![("wd", "0.001")]),
        ("adagrad", vec![]),
        ("rmsprop", vec![("centered", "True")]),
        ("adadelta", vec![]),
        ("signum", vec![]),
        ("ftrl", vec![]),
    ];
    for (name, extra) in kinds {
        for mp in [false, true] {
            let mut p = vec![("learning_rate", "0.1"), ("rescale_grad", "0.5")];
            p.extend(extra.iter().copied());
            if mp {
                p.push(("multi_precision", "True"));
            }
            let (engine, host) = (
                FusedOptimizer::new(name, &params(&p)).unwrap(),
                FusedOptimizer::new(name, &params(&p)).unwrap(),
            );
            let key = ParamKey::Int(3);
            let dtype = if mp { DType::F16 } else { DType::F32 };
            let as_bytes = |v: &[f32]| -> Vec<u8> {
                if mp {
                    v.iter()
                        .flat_map(|x| f16::from_f32(*x).to_le_bytes())
                        .collect()
                } else {
                    v.iter().flat_map(|x| x.to_le_bytes()).collect()
                }
            };
            let w = NDArray::empty(&[5], dtype, crate::context::Context::cpu(0)).unwrap();
            w.write_bytes(as_bytes(&w0)).unwrap();
            let gr = NDArray::empty(&[5], dtype, crate::context::Context::cpu(0)).unwrap();
            gr.write_bytes(as_bytes(&g)).unwrap();
            let st = engine.create_state(&key, &w).unwrap();

            let mut hw = HostArray::copy_of(&as_bytes(&w0), dtype);
            let mut hg = HostArray::copy_of(&as_bytes(&g), dtype);
            let mut hst = host.create_state_now(&hw.blob()).unwrap();
            assert_eq!(hst.len(), st.len(), "{name} mp={mp}");
            for _ in 0..3 {
                engine.update(&key, &w, &gr, &st, 0).unwrap();
                let blobs: Vec<_> = hst.iter_mut().map(HostArray::blob).collect();
                host.update_now(&key, &hw.blob(), &hg.blob(), &blobs)
                    .unwrap();
            }
            assert_eq!(w.to_bytes().unwrap(), hw.bytes(), "{name} mp={mp}");
            for (a, b) in st.iter().zip(&hst) {
                assert_eq!(a.to_bytes().unwrap(), b.bytes(), "{name} mp={mp} state");
            }
        }
    }
}

#[test]
fn host_updates_refuse_mismatched_arrays() {
    use super::HostArray;
    use crate::dtype::DType;
    let opt = FusedOptimizer::new("sgd", &params(&[("momentum", "0.9")])).unwrap();
    let key = ParamKey::Int(0);
    let mut w = HostArray::copy_of(&[0u8; 8], DType::F32);
    let mut g = HostArray::copy_of(&[0u8; 12], DType::F32);
    let mut st = opt.create_state_now(&w.blob()).unwrap();
    let blobs: Vec<_> = st.iter_mut().map(HostArray::blob).collect();
    let err = opt
        .update_now(&key, &w.blob(), &g.blob(), &blobs)
        .unwrap_err();
    assert!(err.message().contains("gradient of key 0"), "{err}");
    let err = opt.update_now(&key, &w.blob(), &w.blob(), &[]).unwrap_err();
    assert!(err.message().contains("expects 1 state"), "{err}");
    assert_eq!(w.bytes(), &[0u8; 8]);
}

#[test]
fn factor_schedules_keep_their_steps_for_the_log() {
    let desc = r#"{"type": "FactorScheduler", "step": 5, "factor": 0.5, "base_lr": 0.1,
                   "stop_factor_lr": 0.02}"#;
    let mut s = LrScheduler::from_json(desc).unwrap();
    for n in 1..=16 {
        s.lr(n);
    }
    let steps: Vec<(i64, f64, bool)> = s
        .changes
        .iter()
        .map(|c| (c.num_update, c.lr, c.floored))
        .collect();
    assert_eq!(
        steps,
        [(6, 0.05, false), (11, 0.025, false), (16, 0.02, true)]
    );
    // Pending log lines are not part of the state.
    assert_eq!(LrScheduler::from_json(&s.to_json()).unwrap(), s);
    let multi = r#"{"type": "MultiFactorScheduler", "step": [2, 4], "factor": 0.1}"#;
    let mut m = LrScheduler::from_json(multi).unwrap();
    m.lr(5);
    assert_eq!(
        m.changes.iter().map(|c| c.num_update).collect::<Vec<_>>(),
        [5, 5]
    );
}
