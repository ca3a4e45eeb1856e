//! The store interface over a whole cluster in one process.

use super::*;
use crate::kvstore::dist::layout::ServerCommand;
use crate::kvstore::dist::worker::tests::with_cluster;
use crate::kvstore::testutil::{full, values};

#[test]
fn dist_sync_through_the_store_interface() {
    with_cluster(2, 2, 1_000_000, |w| {
        let kv = DistStore::new("dist_sync", w.clone());
        assert_eq!(kv.num_workers(), 2);
        if kv.rank() == 0 {
            w.command_and_wait(ServerCommand::SyncMode, b"").unwrap();
        }
        let keys = [Key::Int(3), Key::Int(4)];
        kv.init(
            &keys,
            &[
                full(&[2, 2], 1.0, Context::cpu(0)),
                full(&[5], 2.0, Context::cpu(0)),
            ],
        )
        .unwrap();
        let e = kv
            .init(&keys[..1], &[full(&[2, 2], 1.0, Context::cpu(0))])
            .unwrap_err();
        assert!(e.message().contains("duplicate init of key 3"), "{e}");
        // String keys are numbered from 0 like int keys: a store takes one kind only.
        let e = kv
            .init(
                &[Key::Name("w".into())],
                &[full(&[1], 1.0, Context::cpu(0))],
            )
            .unwrap_err();
        assert!(
            e.message().contains("int keys or str keys, not both"),
            "{e}"
        );
        // After init, every worker pulls the initial values.
        let outs = vec![
            vec![full(&[2, 2], 0.0, Context::cpu(0))],
            vec![full(&[5], 0.0, Context::cpu(1))],
        ];
        kv.pull(&keys, &outs, &[0, 0]).unwrap();
        assert_eq!(values(&outs[0][0]), vec![1.0; 4]);
        assert_eq!(values(&outs[1][0]), vec![2.0; 5]);
        // Each worker pushes from two devices; the round sums both workers' sums.
        let r = (kv.rank() + 1) as f32;
        let pushed = vec![
            vec![
                full(&[2, 2], r, Context::cpu(0)),
                full(&[2, 2], r, Context::cpu(1)),
            ],
            vec![full(&[5], 10.0 * r, Context::cpu(0))],
        ];
        kv.pushpull(&keys, &pushed, &outs, &[1, 0]).unwrap();
        assert_eq!(values(&outs[0][0]), vec![6.0; 4]);
        assert_eq!(values(&outs[1][0]), vec![30.0; 5]);
        // A key given twice in one push is one push of the sum: one round per worker.
        let twice = vec![
            vec![full(&[5], r, Context::cpu(0))],
            vec![full(&[5], 1.0, Context::cpu(0))],
        ];
        kv.push(&[keys[1].clone(), keys[1].clone()], &twice, &[0, 0])
            .unwrap();
        kv.pull(&keys[1..], &outs[1..], &[0]).unwrap();
        assert_eq!(values(&outs[1][0]), vec![5.0; 5]);
        // Bad input changes nothing and says what was wrong.
        let e = kv
            .push(
                &[Key::Int(9)],
                &[vec![full(&[1], 0.0, Context::cpu(0))]],
                &[0],
            )
            .unwrap_err();
        assert!(
            e.message().contains("key 9 has not been initialized"),
            "{e}"
        );
        let e = kv
            .pull(&keys[..1], &[vec![full(&[3], 0.0, Context::cpu(0))]], &[0])
            .unwrap_err();
        assert!(e.message().contains("(3,)"), "{e}");
        kv.barrier().unwrap();
    });
}

#[test]
fn a_store_opened_from_its_settings_joins_and_sets_the_servers_mode() {
    use crate::kvstore::dist::meta::Role;
    use crate::kvstore::dist::server::DistServer;
    use crate::kvstore::dist::van::tests::{config, scheduler_port};
    use crate::kvstore::dist::van::Van;
    use crate::kvstore::dist::worker::tests::TextController;
    let port = scheduler_port();
    let c = |role| config(role, port, 1, 1);
    let (sc, svc, wc) = (c(Role::Scheduler), c(Role::Server), c(Role::Worker));
    let scheduler = std::thread::spawn(move || Van::join(sc).and_then(|v| v.finalize()));
    let server =
        std::thread::spawn(move || DistServer::join(svc).and_then(|s| s.run(&mut TextController)));
    let kv = DistStore::open("dist_sync", wc).unwrap();
    assert_eq!(
        (kv.type_name(), kv.rank(), kv.num_workers()),
        ("dist_sync", 0, 1)
    );
    kv.init(&[Key::Int(0)], &[full(&[3], 4.0, Context::cpu(0))])
        .unwrap();
    // One worker: each push is a whole round, and the sum replaces the value.
    let out = vec![vec![full(&[3], 0.0, Context::cpu(0))]];
    kv.pushpull(
        &[Key::Int(0)],
        &[vec![full(&[3], 1.5, Context::cpu(0))]],
        &out,
        &[0],
    )
    .unwrap();
    assert_eq!(values(&out[0][0]), vec![1.5; 3]);
    kv.worker().shutdown().unwrap();
    server.join().unwrap().unwrap();
    scheduler.join().unwrap().unwrap();
}

#[test]
fn two_bit_compressed_pushes_carry_codes_and_keep_residuals() {
    // A bound of 32 values: key 1 (20 values) goes to one server, key 2 (40) to both.
    with_cluster(2, 2, 32, |w| {
        let kv = DistStore::new("dist_sync", w.clone());
        if kv.rank() == 0 {
            w.command_and_wait(ServerCommand::SyncMode, b"").unwrap();
        }
        kv.set_gradient_compression(0.5).unwrap();
        let keys = [Key::Int(1), Key::Int(2)];
        kv.init(
            &keys,
            &[
                full(&[20], 0.0, Context::cpu(0)),
                full(&[40], 0.0, Context::cpu(0)),
            ],
        )
        .unwrap();
        let e = kv.set_gradient_compression(0.5).unwrap_err();
        assert!(e.message().contains("before the first init"), "{e}");
        let mine = 0.3 * (kv.rank() + 1) as f32;
        let outs = vec![
            vec![full(&[20], 9.0, Context::cpu(0))],
            vec![full(&[40], 9.0, Context::cpu(0))],
        ];
        // Round 1: 0.3 sends nothing, 0.6 sends 0.5; round 2: the residuals 0.3 and 0.1
        // plus the new pushes both reach 0.5.
        for want in [0.5, 1.0] {
            let pushed: Vec<Vec<_>> = [20, 40]
                .iter()
                .map(|&n| vec![full(&[n], mine, Context::cpu(0))])
                .collect();
            kv.push(&keys, &pushed, &[0, 0]).unwrap();
            kv.pull(&keys, &outs, &[0, 0]).unwrap();
            for o in outs.iter().flatten() {
                assert_eq!(values(o), vec![want; o.size()]);
            }
        }
    });
}

#[test]
fn device_sync_sums_on_a_pushing_device_and_sends_from_the_host() {
    with_cluster(1, 2, 1_000_000, |w| {
        if w.rank() == 0 {
            w.command_and_wait(ServerCommand::SyncMode, b"").unwrap();
        }
        let on_devices = DistStore::new("dist_device_sync", w.clone());
        let on_host = DistStore::new("dist_sync", w.clone());
        let r = (on_devices.rank() + 1) as f32;
        let devs = [Context::cpu(1), Context::cpu(2)];
        for (kv, key) in [(&on_devices, 7), (&on_host, 8)] {
            let k = [Key::Int(key)];
            kv.init(&k, &[full(&[3], 0.0, Context::cpu(0))]).unwrap();
            let outs = vec![devs.iter().map(|d| full(&[3], 0.0, *d)).collect()];
            for round in 1..=2 {
                let vals = vec![devs.iter().map(|d| full(&[3], r, *d)).collect()];
                kv.pushpull(&k, &vals, &outs, &[0]).unwrap();
                // Each worker's two values, summed over both workers: 2·1 + 2·2.
                for o in &outs[0] {
                    assert_eq!(values(o), vec![6.0; 3], "{} round {round}", kv.type_name());
                }
            }
            // A single value from a device is copied to the host and sent.
            let one = vec![vec![full(&[3], r, Context::cpu(2))]];
            kv.pushpull(&k, &one, &outs, &[0]).unwrap();
            assert_eq!(values(&outs[0][1]), vec![3.0; 3]);
            let sum = kv.entries.lock()[&k[0]].merged.lock().clone();
            match kv.type_name() {
                "dist_device_sync" => {
                    let at = sum.expect("summed on a device").context();
                    assert!(devs.contains(&at), "summed on {at:?}");
                }
                _ => assert!(sum.is_none(), "dist_sync sums in the host buffer"),
            }
        }
        on_devices.barrier().unwrap();
    });
}

#[test]
fn a_pull_sent_behind_its_push_gets_the_round_of_a_late_worker() {
    with_cluster(2, 2, 4, |w| {
        if w.rank() == 0 {
            w.command_and_wait(ServerCommand::SyncMode, b"").unwrap();
        }
        let kv = DistStore::new("dist_sync", w.clone());
        let r = (kv.rank() + 1) as f32;
        // 8 elements over a bound of 4: the key is split over both servers.
        let k = [Key::Int(5)];
        kv.init(&k, &[full(&[8], 0.0, Context::cpu(0))]).unwrap();
        let out = vec![vec![full(&[8], 0.0, Context::cpu(0))]];
        let value = vec![vec![full(&[8], r, Context::cpu(0))]];
        kv.pushpull(&k, &value, &out, &[0]).unwrap();
        assert_eq!(values(&out[0][0]), vec![3.0; 8]);
        assert!(
            w.orders_pulls(5, 8, DType::F32),
            "both servers answered with ordered pulls"
        );
        for round in 2..=4 {
            if kv.rank() == 1 {
                // Rank 0's pull reaches the servers long before this push.
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            let value = vec![vec![full(&[8], r * round as f32, Context::cpu(0))]];
            kv.push(&k, &value, &[0]).unwrap();
            kv.pull(&k, &out, &[0]).unwrap();
            let sum = 3.0 * round as f32;
            assert_eq!(values(&out[0][0]), vec![sum; 8], "round {round}");
        }
        kv.barrier().unwrap();
    });
}

#[test]
fn a_failed_push_fails_the_pull_sent_behind_it_and_the_store_goes_on() {
    with_cluster(1, 2, 1_000_000, |w| {
        if w.rank() == 0 {
            w.command_and_wait(ServerCommand::SyncMode, b"").unwrap();
        }
        let kv = DistStore::new("dist_sync", w.clone());
        let k = [Key::Int(2)];
        kv.init(&k, &[full(&[4], 1.0, Context::cpu(0))]).unwrap();
        let value = vec![vec![full(&[4], 1.0, Context::cpu(0))]];
        let out = vec![vec![full(&[4], 0.0, Context::cpu(0))]];
        kv.pushpull(&k, &value, &out, &[0]).unwrap();
        assert_eq!(values(&out[0][0]), vec![2.0; 4]);
        assert!(w.orders_pulls(2, 4, DType::F32));
        let set = |body: &[u8]| {
            if w.rank() == 0 {
                w.command_and_wait(ServerCommand::Controller, body).unwrap();
            }
            kv.barrier().unwrap();
        };
        set(b"fail");
        kv.pushpull(&k, &value, &out, &[0]).unwrap();
        let e = out[0][0].wait_to_read().unwrap_err();
        assert!(e.message().contains("the update of key 2 failed"), "{e}");
        // The push failed as well. Both workers share this process's engine: raising its
        // errors clears them all.
        kv.barrier().unwrap();
        let _ = engine::get().wait_for_all();
        kv.barrier().unwrap();
        set(b"0.5");
        kv.pushpull(&k, &value, &out, &[0]).unwrap();
        // The failed round left the value; this one moves it by 0.5 * (1 + 1).
        assert_eq!(values(&out[0][0]), vec![1.0; 4]);
    });
}

#[test]
fn a_push_of_a_failed_value_fails_the_pull_sent_behind_it() {
    with_cluster(1, 2, 1_000_000, |w| {
        if w.rank() == 0 {
            w.command_and_wait(ServerCommand::SyncMode, b"").unwrap();
        }
        let kv = DistStore::new("dist_sync", w.clone());
        let k = [Key::Int(6)];
        kv.init(&k, &[full(&[4], 0.0, Context::cpu(0))]).unwrap();
        let out = vec![vec![full(&[4], 0.0, Context::cpu(0))]];
        let ones = || vec![vec![full(&[4], 1.0, Context::cpu(0))]];
        kv.pushpull(&k, &ones(), &out, &[0]).unwrap();
        assert_eq!(values(&out[0][0]), vec![2.0; 4]);
        assert!(w.orders_pulls(6, 4, DType::F32));
        // The value's producer fails: its push is never sent, and the pull behind it
        // says so instead of handing back the value from before.
        let value = full(&[4], 1.0, Context::cpu(0));
        engine::get().push_sync(
            Box::new(|_| Err(Error::Runtime("the value failed".into()))),
            PushSpec::new(
                "Fail",
                Context::cpu(0),
                &[],
                std::slice::from_ref(value.var()),
            ),
        );
        kv.push(&k, &[vec![value]], &[0]).unwrap();
        kv.pull(&k, &out, &[0]).unwrap();
        let e = out[0][0].wait_to_read().unwrap_err();
        assert!(
            e.message().contains("a push before this pull was not sent"),
            "{e}"
        );
        // Both workers share this process's engine: raising its errors clears them all.
        kv.barrier().unwrap();
        let _ = engine::get().wait_for_all();
        kv.barrier().unwrap();
        // The store goes on: with no updater, the next round's sum is the value.
        let threes = vec![vec![full(&[4], 3.0, Context::cpu(0))]];
        kv.pushpull(&k, &threes, &out, &[0]).unwrap();
        assert_eq!(values(&out[0][0]), vec![6.0; 4]);
    });
}
