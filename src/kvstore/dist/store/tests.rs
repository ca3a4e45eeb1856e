//! The server's rounds, request by request.

use super::*;
use crate::kvstore::dist::compress::{compressed_bytes, quantize_2bit};
use crate::kvstore::dist::layout::data_head;
use crate::testutil::{f32_bytes as f32s, f32_values as floats};

const BEGIN: u64 = 1000;

/// A request's data frames as the server receives them.
fn shared(kv: &KvPairs) -> Vec<SharedBytes> {
    kv.frames().into_iter().map(SharedBytes::from).collect()
}

fn request(push: bool, pull: bool, timestamp: i32, head: i32) -> Meta {
    Meta {
        head,
        request: true,
        push,
        pull,
        app_id: 0,
        customer_id: 0,
        timestamp,
        ..Meta::default()
    }
}

/// A dense float32 request for worker key `key`.
fn dense(
    store: &mut ServerStore,
    sender: i32,
    push: bool,
    pull: bool,
    ts: i32,
    key: u64,
    vals: &[f32],
) -> Result<Vec<Reply>> {
    let kv = KvPairs {
        keys: vec![BEGIN + key],
        vals: f32s(vals),
        lens: if push {
            vec![(vals.len() * 4) as i32]
        } else {
            Vec::new()
        },
    };
    let frames = shared(&kv);
    store.handle(
        sender,
        request(push, pull, ts, data_head(RequestKind::Dense, DType::F32)),
        frames,
    )
}

fn value_of(r: &Reply) -> Vec<f32> {
    let frames: Vec<&[u8]> = r.data.iter().map(Frame::bytes).collect();
    let kv = KvPairs::from_frames(&frames).unwrap();
    assert_eq!(kv.lens, [kv.vals.len() as i32]);
    floats(&kv.vals)
}

#[test]
fn the_first_push_stores_a_key_and_pulls_answer_at_once() {
    let mut s = ServerStore::new(BEGIN, 2);
    let r = dense(&mut s, 9, true, false, 0, 3, &[1.0, 2.0]).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].to, r[0].meta.timestamp, r[0].meta.request),
        (9, 0, false)
    );
    assert!(r[0].data.is_empty(), "a push is answered without data");
    let r = dense(&mut s, 11, false, true, 5, 3, &[]).unwrap();
    assert_eq!(
        (r[0].to, r[0].meta.timestamp, r[0].meta.pull),
        (11, 5, true)
    );
    assert_eq!(r[0].meta.head, 0);
    assert_eq!(value_of(&r[0]), [1.0, 2.0]);
    let frames: Vec<&[u8]> = r[0].data.iter().map(Frame::bytes).collect();
    assert_eq!(KvPairs::from_frames(&frames).unwrap().keys, [BEGIN + 3]);
}

#[test]
fn a_sync_round_sums_one_push_per_worker_then_answers_them_all() {
    let mut s = ServerStore::new(BEGIN, 2);
    s.set_sync_mode();
    dense(&mut s, 9, true, false, 0, 1, &[0.0, 0.0]).unwrap();
    assert!(dense(&mut s, 9, true, false, 1, 1, &[1.0, 2.0])
        .unwrap()
        .is_empty());
    // A pull in the middle of a round gets the value before it, unless its sender's push
    // is in the round: that one waits for the round's value.
    assert_eq!(
        value_of(&dense(&mut s, 11, false, true, 2, 1, &[]).unwrap()[0]),
        [0.0, 0.0]
    );
    assert!(dense(&mut s, 9, false, true, 2, 1, &[]).unwrap().is_empty());
    let r = dense(&mut s, 11, true, true, 7, 1, &[10.0, 20.0]).unwrap();
    assert_eq!(
        r.iter()
            .map(|r| (r.to, r.meta.timestamp, r.meta.push))
            .collect::<Vec<_>>(),
        [(9, 1, true), (11, 7, true), (9, 2, false)]
    );
    assert!(r[0].data.is_empty());
    assert_eq!(
        value_of(&r[1]),
        [11.0, 22.0],
        "push-pull gets the round's value"
    );
    assert_eq!(value_of(&r[2]), [11.0, 22.0], "so does the waiting pull");
    // It counts pushes, not workers: one worker pushing twice completes a round.
    assert!(dense(&mut s, 9, true, false, 3, 1, &[1.0, 1.0])
        .unwrap()
        .is_empty());
    assert_eq!(
        dense(&mut s, 9, true, false, 4, 1, &[2.0, 2.0])
            .unwrap()
            .len(),
        2
    );
    assert_eq!(floats(&s.value(BEGIN + 1).unwrap().bytes), [3.0, 3.0]);
}

struct Sgd(f32);

impl Updater for Sgd {
    fn update(&mut self, key: u64, merged: &Flat, stored: &mut Flat) -> Result<()> {
        assert_eq!(key, 1, "the updater sees the worker's key");
        let g = floats(&merged.bytes);
        let w: Vec<f32> = floats(&stored.bytes)
            .iter()
            .zip(&g)
            .map(|(w, g)| w - self.0 * g)
            .collect();
        stored.bytes = f32s(&w).into();
        Ok(())
    }
}

#[test]
fn an_updater_applies_the_round_or_each_async_push() {
    let mut s = ServerStore::new(BEGIN, 2);
    s.set_sync_mode();
    s.set_updater(Box::new(Sgd(0.5)));
    dense(&mut s, 9, true, false, 0, 1, &[1.0]).unwrap();
    dense(&mut s, 9, true, false, 1, 1, &[1.0]).unwrap();
    dense(&mut s, 11, true, false, 1, 1, &[3.0]).unwrap();
    assert_eq!(floats(&s.value(BEGIN + 1).unwrap().bytes), [-1.0]);

    let mut a = ServerStore::new(BEGIN, 2);
    a.set_updater(Box::new(Sgd(0.5)));
    dense(&mut a, 9, true, false, 0, 1, &[1.0]).unwrap();
    let r = dense(&mut a, 9, true, true, 1, 1, &[4.0]).unwrap();
    assert_eq!(value_of(&r[0]), [-1.0], "async: each push updates at once");
}

struct Failing;

impl Updater for Failing {
    fn update(&mut self, _key: u64, _merged: &Flat, _stored: &mut Flat) -> Result<()> {
        Err(Error::Value("the optimizer failed".into()))
    }
}

#[test]
fn a_failed_update_fails_every_request_of_its_round() {
    let mut s = ServerStore::new(BEGIN, 2);
    s.set_sync_mode();
    dense(&mut s, 9, true, false, 0, 1, &[1.0]).unwrap();
    s.set_updater(Box::new(Failing));
    assert!(dense(&mut s, 9, true, false, 1, 1, &[1.0])
        .unwrap()
        .is_empty());
    assert!(dense(&mut s, 9, false, true, 2, 1, &[]).unwrap().is_empty());
    let e = dense(&mut s, 11, true, false, 3, 1, &[3.0]).unwrap_err();
    assert!(e.message().contains("the optimizer failed"), "{e}");
    let failed: Vec<(i32, i32)> = s
        .take_failed()
        .iter()
        .map(|(to, m)| (*to, m.timestamp))
        .collect();
    assert_eq!(failed, [(9, 1), (9, 2)]);
    assert!(s.take_failed().is_empty());
    assert_eq!(
        floats(&s.value(BEGIN + 1).unwrap().bytes),
        [1.0],
        "unchanged"
    );
}

#[test]
fn async_without_an_updater_keeps_the_last_push() {
    let mut s = ServerStore::new(BEGIN, 2);
    dense(&mut s, 9, true, false, 0, 2, &[1.0]).unwrap();
    dense(&mut s, 11, true, false, 0, 2, &[5.0]).unwrap();
    assert_eq!(floats(&s.value(BEGIN + 2).unwrap().bytes), [5.0]);
}

#[test]
fn two_bit_pushes_are_decoded_and_summed() {
    let mut s = ServerStore::new(BEGIN, 2);
    s.set_sync_mode();
    s.set_compression(0.5);
    dense(&mut s, 9, true, false, 0, 4, &[0.0; 5]).unwrap();
    let head = data_head(RequestKind::Compressed, DType::F32);
    let mut push = |sender, grad: &[f32]| {
        let mut residual = vec![0f32; grad.len()];
        let mut out = vec![0u8; compressed_bytes(grad.len())];
        quantize_2bit(grad, &mut residual, 0.5, &mut out);
        let kv = KvPairs {
            keys: vec![BEGIN + grad.len() as u64, BEGIN + 4],
            vals: out.clone(),
            lens: vec![0, out.len() as i32],
        };
        let frames = shared(&kv);
        s.handle(sender, request(true, false, 1, head), frames)
    };
    assert!(push(9, &[0.6, -0.7, 0.1, 2.0, -0.2]).unwrap().is_empty());
    assert_eq!(push(11, &[0.6, 0.0, 0.0, -3.0, 0.0]).unwrap().len(), 2);
    assert_eq!(
        floats(&s.value(BEGIN + 4).unwrap().bytes),
        [1.0, -0.5, 0.0, 0.0, 0.0]
    );
}

#[test]
fn bad_requests_are_errors_naming_the_key() {
    let mut s = ServerStore::new(BEGIN, 1);
    let e = dense(&mut s, 9, false, true, 0, 6, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("key 6 was pulled before any push initialised it"),
        "{e}"
    );
    dense(&mut s, 9, true, false, 0, 6, &[1.0, 2.0]).unwrap();
    let e = dense(&mut s, 9, true, false, 1, 6, &[1.0])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("key 6 holds 2 elements of float32; a push sent 1 of float32"),
        "{e}"
    );
    let sparse = request(
        true,
        false,
        0,
        data_head(RequestKind::RowSparse, DType::F32),
    );
    assert!(s
        .handle(9, sparse, Vec::new())
        .unwrap_err()
        .to_string()
        .contains("row_sparse"));
    let two = KvPairs {
        keys: vec![BEGIN, BEGIN + 1],
        vals: f32s(&[1.0, 2.0]),
        lens: vec![4, 4],
    };
    let frames = shared(&two);
    let e = s
        .handle(9, request(true, false, 0, 0), frames)
        .unwrap_err()
        .to_string();
    assert!(e.contains("one key, not 2"), "{e}");
    let head = data_head(RequestKind::Compressed, DType::F32);
    let e = s
        .handle(9, request(true, false, 0, head), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("before gradient compression was set"), "{e}");
}

#[test]
fn multi_precision_sums_half_keys_in_single_precision() {
    use half::f16;
    let halves = |v: f32| f16::from_f32(v).to_le_bytes().to_vec();
    let head = data_head(RequestKind::Dense, DType::F16);
    let push = |s: &mut ServerStore, sender, v: f32| {
        let kv = KvPairs {
            keys: vec![BEGIN + 1],
            vals: halves(v),
            lens: vec![2],
        };
        let frames = shared(&kv);
        s.handle(sender, request(true, false, 0, head), frames)
            .unwrap()
    };
    for (multi, want) in [(false, 2048.0), (true, 2050.0)] {
        let mut s = ServerStore::new(BEGIN, 3);
        s.set_sync_mode();
        if multi {
            s.set_multi_precision();
        }
        push(&mut s, 9, 0.0);
        // In half precision 2048 + 1 rounds back to 2048 (spacing 2), twice; in single
        // precision the round sums to 2050, which half holds exactly.
        push(&mut s, 9, 2048.0);
        push(&mut s, 11, 1.0);
        assert_eq!(push(&mut s, 13, 1.0).len(), 3);
        let stored = s.value(BEGIN + 1).unwrap();
        assert_eq!(stored.dtype, DType::F16, "the stored key keeps its type");
        let got = f16::from_le_bytes(stored.bytes[..2].try_into().unwrap());
        assert_eq!(got.to_f32(), want, "multi_precision={multi}");
    }
}
