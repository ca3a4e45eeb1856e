//! Unit tests of the store: assignment, sums over devices, updaters, placement, errors.

use super::testutil::{cpus, full, values};
use super::*;
use crate::context::Context;
use crate::error::Result;
use crate::ndarray::NDArray;
use std::sync::Arc;

/// A store of `kind` with each of `keys` set to a `shape` array filled with `v`.
fn store_with(kind: &str, keys: &[Key], shape: &[usize], v: f32) -> LocalStore {
    let kv = LocalStore::new(kind).unwrap();
    let inits: Vec<NDArray> = keys
        .iter()
        .map(|_| full(shape, v, Context::cpu(0)))
        .collect();
    kv.init(keys, &inits).unwrap();
    kv
}

/// What a pull of `key` into a `shape` array on `ctx` reads.
fn pulled(kv: &LocalStore, key: &Key, shape: &[usize], ctx: Context) -> Vec<f32> {
    let out = full(shape, -1.0, ctx);
    kv.pull(std::slice::from_ref(key), &[vec![out.clone()]], &[0])
        .unwrap();
    values(&out)
}

/// One `shape` array filled with `v` on each of the first `n` CPU devices.
fn on_cpus(n: i32, shape: &[usize], v: f32) -> Vec<NDArray> {
    cpus(n).into_iter().map(|c| full(shape, v, c)).collect()
}

#[test]
fn push_assigns_and_sums_over_devices() {
    let k = Key::Int(3);
    let kv = store_with("local", std::slice::from_ref(&k), &[2, 3], 2.0);
    assert_eq!(pulled(&kv, &k, &[2, 3], Context::cpu(1)), vec![2.0; 6]);
    kv.push(std::slice::from_ref(&k), &[on_cpus(4, &[2, 3], 1.5)], &[0])
        .unwrap();
    let outs = on_cpus(3, &[2, 3], 0.0);
    kv.pull(std::slice::from_ref(&k), std::slice::from_ref(&outs), &[0])
        .unwrap();
    for o in &outs {
        assert_eq!(values(o), vec![6.0; 6]);
    }
}

#[test]
fn more_devices_than_the_first_push() {
    let k = Key::Name("w".into());
    let kv = store_with("device", std::slice::from_ref(&k), &[4], 0.0);
    for n in [1, 2, 4, 3] {
        kv.push(std::slice::from_ref(&k), &[on_cpus(n, &[4], 1.0)], &[0])
            .unwrap();
        assert_eq!(pulled(&kv, &k, &[4], Context::cpu(0)), vec![n as f32; 4]);
    }
}

#[test]
fn device_store_spreads_keys_over_devices() {
    let keys: Vec<Key> = (0..4).map(Key::Int).collect();
    let kv = store_with("device", &keys, &[8], 0.0);
    let pushes: Vec<Vec<NDArray>> = (0..4).map(|_| on_cpus(2, &[8], 1.0)).collect();
    kv.push(&keys, &pushes, &[0; 4][..keys.len()]).unwrap();
    let placed: Vec<i32> = keys
        .iter()
        .map(|k| kv.stored(k).unwrap().context().dev_id)
        .collect();
    assert_eq!(placed.iter().filter(|d| **d == 0).count(), 2, "{placed:?}");
    assert_eq!(placed.iter().filter(|d| **d == 1).count(), 2, "{placed:?}");
}

struct AddTwice;

impl StoreUpdater for AddTwice {
    fn create_state(&self, _: &Key, w: &NDArray) -> Result<Vec<NDArray>> {
        Ok(vec![full(w.shape(), 0.0, w.context())])
    }
    fn update(&self, _: &Key, w: &NDArray, g: &NDArray, s: &[NDArray], p: i32) -> Result<()> {
        // stored += 2 * grad, by summing the gradient in twice.
        CommCpu.reduce(&[w.clone(), g.clone(), g.clone()], &s[0], p)?;
        crate::ndarray::copy_into(&s[0], w)
    }
}

#[test]
fn built_in_updater_gets_the_sum_and_keeps_state() {
    let keys = [Key::Int(9), Key::Int(5)];
    let kv = store_with("local", &keys, &[3], 1.0);
    kv.set_updater(Some(Arc::new(AddTwice)));
    let pushes: Vec<Vec<NDArray>> = (0..2).map(|_| on_cpus(2, &[3], 1.0)).collect();
    kv.push(&keys, &pushes, &[0; 4][..keys.len()]).unwrap();
    assert_eq!(pulled(&kv, &keys[0], &[3], Context::cpu(0)), vec![5.0; 3]);
    let states = kv.states();
    assert_eq!(states.len(), 2);
    assert_eq!(states[0].0, Key::Int(9), "states follow init order");
}

#[test]
fn bad_calls_change_nothing() {
    let k = Key::Int(1);
    let kv = store_with("local", std::slice::from_ref(&k), &[2], 7.0);
    let err = kv
        .push(
            &[k.clone(), Key::Int(2)],
            &[
                vec![full(&[2], 1.0, Context::cpu(0))],
                vec![full(&[2], 1.0, Context::cpu(0))],
            ],
            &[0, 0],
        )
        .unwrap_err();
    assert!(
        err.message().contains("key 2 has not been initialized"),
        "{err}"
    );
    let err = kv
        .push(
            std::slice::from_ref(&k),
            &[vec![full(&[3], 1.0, Context::cpu(0))]],
            &[0],
        )
        .unwrap_err();
    assert!(
        err.message().contains("(3,)") && err.message().contains("(2,)"),
        "{err}"
    );
    let err = kv
        .init(
            std::slice::from_ref(&k),
            &[full(&[2], 0.0, Context::cpu(0))],
        )
        .unwrap_err();
    assert!(err.message().contains("duplicate init"), "{err}");
    assert_eq!(pulled(&kv, &k, &[2], Context::cpu(0)), vec![7.0; 2]);
    assert!(LocalStore::new("nonsense").is_err());
}

#[test]
fn reduce_for_updater_groups_and_sums_in_update_order() {
    let keys = [Key::Int(4), Key::Int(2)];
    let kv = store_with("local", &keys, &[2], 1.0);
    let one = full(&[2], 3.0, Context::cpu(0));
    let pushes = vec![on_cpus(2, &[2], 2.0), vec![one.clone()]];
    let reduced = kv.reduce_for_updater(&keys, &pushes, &[0, 0]).unwrap();
    assert_eq!(reduced.len(), 2);
    let (k, merged, stored) = &reduced[0];
    assert_eq!(k, &Key::Int(2), "int keys update in increasing order");
    assert!(
        merged.same_chunk(&one),
        "one value on the summing device is not copied"
    );
    assert!(stored.same_chunk(&kv.stored(&keys[1]).unwrap()));
    let (k, merged, stored) = &reduced[1];
    assert_eq!(k, &Key::Int(4));
    assert_eq!(values(merged), vec![4.0; 2]);
    assert_eq!(values(stored), vec![1.0; 2], "the caller applies the sum");
}
