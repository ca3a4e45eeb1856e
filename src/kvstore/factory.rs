//! `create`: the store of MXNet's type name, behind the [`Store`] interface.

use super::dist::client::DistStore;
use super::{LocalStore, Store};
use crate::error::Result;
use std::sync::Arc;

/// A store of MXNet's type `name`: `local`, `local_allreduce_cpu` and `local_update_cpu`
/// sum on the host; `device` and `local_allreduce_device` on the devices pushing; a name
/// with `dist` in it is a worker's store of the cluster the environment describes
/// (`dist_sync`, `dist_device_sync`, `dist_sync_device` and `dist` are synchronous,
/// `dist_async` is not, as MXNet reads the names).
pub fn create(name: &str) -> Result<Arc<dyn Store>> {
    if name.contains("dist") {
        return Ok(Arc::new(DistStore::for_process(name)?));
    }
    Ok(Arc::new(LocalStore::new(name)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Context;
    use crate::error::Error;
    use crate::kvstore::testutil::{cpus, full, values};
    use crate::kvstore::Key;

    fn error_of(name: &str) -> Error {
        create(name).err().expect("an error")
    }

    #[test]
    fn local_names_make_local_stores() {
        for name in [
            "local",
            "local_allreduce_cpu",
            "local_update_cpu",
            "device",
            "local_allreduce_device",
        ] {
            let kv = create(name).unwrap();
            assert_eq!(kv.type_name(), name);
            assert_eq!((kv.rank(), kv.num_workers()), (0, 1));
            kv.barrier().unwrap();
        }
    }

    #[test]
    fn the_name_picks_where_values_are_kept() {
        for (name, home) in [
            ("local", Context::cpu(0)),
            ("local_update_cpu", Context::cpu(0)),
            ("device", Context::cpu(2)),
            ("local_allreduce_device", Context::cpu(2)),
        ] {
            let kv = create(name).unwrap();
            let k = Key::Int(0);
            kv.init(
                std::slice::from_ref(&k),
                &[full(&[2], 1.0, Context::cpu(2))],
            )
            .unwrap();
            assert_eq!(kv.stored(&k).unwrap().context(), home, "{name}");
        }
    }

    #[test]
    fn distributed_and_unknown_names_are_clear_errors() {
        // Without a launcher's environment, a distributed store names what is missing.
        if std::env::var_os("DMLC_ROLE").is_none() {
            for name in ["dist_sync", "dist_async", "dist_device_sync", "dist"] {
                let err = error_of(name);
                assert!(matches!(err, Error::Value(_)), "{name}: {err:?}");
                assert!(err.message().contains("DMLC_ROLE is not set"), "{err}");
            }
        }
        for name in ["nonsense", "", "Local"] {
            let err = error_of(name);
            assert!(matches!(err, Error::Value(_)), "{name}: {err:?}");
            assert!(err.message().contains("unknown KVStore type"), "{err}");
        }
    }

    #[test]
    fn a_store_works_through_the_interface() {
        let kv: Arc<dyn Store> = create("device").unwrap();
        let keys = [Key::Int(1), Key::Name("b".into())];
        let outs: Vec<Vec<_>> = (0..2)
            .map(|_| cpus(2).into_iter().map(|c| full(&[3], 0.0, c)).collect())
            .collect();
        kv.broadcast(
            &keys,
            &[
                full(&[3], 2.0, Context::cpu(0)),
                full(&[3], 5.0, Context::cpu(1)),
            ],
            &outs,
            &[0, 0],
        )
        .unwrap();
        assert_eq!(values(&outs[0][1]), vec![2.0; 3]);
        assert_eq!(values(&outs[1][0]), vec![5.0; 3]);
        let pushed: Vec<Vec<_>> = (0..2)
            .map(|_| cpus(3).into_iter().map(|c| full(&[3], 1.0, c)).collect())
            .collect();
        kv.pushpull(&keys, &pushed, &outs, &[1, 2]).unwrap();
        for o in outs.iter().flatten() {
            assert_eq!(values(o), vec![3.0; 3]);
        }
        // A bad output fails the whole pushpull before anything is pushed.
        let bad = vec![vec![full(&[4], 0.0, Context::cpu(0))], outs[1].clone()];
        let err = kv.pushpull(&keys, &pushed, &bad, &[0, 0]).unwrap_err();
        assert!(err.message().contains("(4,)"), "{err}");
        assert_eq!(values(&kv.stored(&keys[0]).unwrap()), vec![3.0; 3]);
        // So does a bad broadcast output, leaving the key free.
        let k = [Key::Int(7)];
        let err = kv
            .broadcast(
                &k,
                &[full(&[2], 1.0, Context::cpu(0))],
                &[vec![full(&[3], 0.0, Context::cpu(0))]],
                &[0],
            )
            .unwrap_err();
        assert!(err.message().contains("(3,)"), "{err}");
        assert!(kv.stored(&k[0]).is_err());
    }
}
