//! A server's optimizers: the store keeps flat byte arrays, optimizers work on arrays, so
//! [`Mirrored`] keeps a host array of each key's weight and gradient, runs an
//! [`ArrayUpdate`] on them and copies the weight back. The built-in optimizers run as
//! the core's fused updates ([`Fused`]); others through a callback (Python's updater).

use super::flat::Flat;
use super::store::Updater;
use crate::context::Context;
use crate::error::Result;
use crate::kvstore::{Key, StoreUpdater};
use crate::ndarray::NDArray;
use std::collections::HashMap;
use std::sync::Arc;

/// An update of a weight array by a gradient array, done when the weight can be read.
pub trait ArrayUpdate: Send {
    /// Updates `weight` with `grad` for the worker's key `key`.
    fn update(&mut self, key: u64, grad: &NDArray, weight: &NDArray) -> Result<()>;
}

/// The arrays an update of one key runs on.
struct Arrays {
    weight: NDArray,
    grad: NDArray,
}

impl Arrays {
    fn new(like: &Flat) -> Result<Arrays> {
        let shape = [like.len()];
        Ok(Arrays {
            weight: NDArray::empty(&shape, like.dtype, Context::cpu(0))?,
            grad: NDArray::empty(&shape, like.dtype, Context::cpu(0))?,
        })
    }

    fn fits(&self, flat: &Flat) -> bool {
        self.weight.dtype() == flat.dtype && self.weight.size() == flat.len()
    }
}

/// Copies `from` into `to`, once nothing else uses `to`.
fn fill(to: &NDArray, from: &[u8]) -> Result<()> {
    to.wait_to_write()?;
    to.blob().bytes_mut().copy_from_slice(from);
    Ok(())
}

/// A server [`Updater`] running `U` on host arrays mirroring the store's values.
pub struct Mirrored<U> {
    update: U,
    arrays: HashMap<u64, Arrays>,
}

impl<U: ArrayUpdate> Mirrored<U> {
    pub fn new(update: U) -> Mirrored<U> {
        Mirrored {
            update,
            arrays: HashMap::new(),
        }
    }
}

impl<U: ArrayUpdate> Updater for Mirrored<U> {
    fn update(&mut self, key: u64, merged: &Flat, stored: &mut Flat) -> Result<()> {
        let arrays = match self.arrays.get(&key) {
            Some(a) if a.fits(stored) && a.fits(merged) => a,
            _ => {
                let a = Arrays::new(stored)?;
                self.arrays.insert(key, a);
                &self.arrays[&key]
            }
        };
        fill(&arrays.grad, &merged.bytes)?;
        // The store may have changed the value since (a first push, a new optimizer).
        fill(&arrays.weight, &stored.bytes)?;
        self.update.update(key, &arrays.grad, &arrays.weight)?;
        arrays.weight.wait_to_read()?;
        stored
            .bytes
            .make_mut()
            .copy_from_slice(arrays.weight.blob().bytes());
        Ok(())
    }
}

/// A built-in optimizer run as the core's fused updates, with a state per key.
pub struct Fused {
    optimizer: Arc<dyn StoreUpdater>,
    states: HashMap<u64, Vec<NDArray>>,
}

impl Fused {
    pub fn new(optimizer: Arc<dyn StoreUpdater>) -> Fused {
        Fused {
            optimizer,
            states: HashMap::new(),
        }
    }
}

impl ArrayUpdate for Fused {
    fn update(&mut self, key: u64, grad: &NDArray, weight: &NDArray) -> Result<()> {
        let k = Key::Int(key as i64);
        let state = match self.states.get(&key) {
            Some(s) => s,
            None => {
                let s = self.optimizer.create_state(&k, weight)?;
                self.states.entry(key).or_insert(s)
            }
        };
        self.optimizer.update(&k, weight, grad, state, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::error::Error;

    /// `weight -= grad`, or an error for key 9.
    struct Subtract;

    impl ArrayUpdate for Subtract {
        fn update(&mut self, key: u64, grad: &NDArray, weight: &NDArray) -> Result<()> {
            if key == 9 {
                return Err(Error::Value("no update for key 9".into()));
            }
            let g = grad.to_bytes()?;
            let w = weight.to_bytes()?;
            let out: Vec<u8> = w
                .chunks_exact(4)
                .zip(g.chunks_exact(4))
                .flat_map(|(a, b)| {
                    let a = f32::from_le_bytes(a.try_into().unwrap());
                    let b = f32::from_le_bytes(b.try_into().unwrap());
                    (a - b).to_le_bytes()
                })
                .collect();
            weight.write_bytes(out)
        }
    }

    fn flat(v: &[f32]) -> Flat {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        Flat::new(DType::F32, bytes).unwrap()
    }

    #[test]
    fn updates_run_on_arrays_and_land_in_the_store() {
        let mut u = Mirrored::new(Subtract);
        let mut stored = flat(&[5.0, 6.0]);
        u.update(3, &flat(&[1.0, 2.0]), &mut stored).unwrap();
        assert_eq!(stored, flat(&[4.0, 4.0]));
        // A value changed by the store since is read again.
        let mut stored = flat(&[10.0, 10.0]);
        u.update(3, &flat(&[1.0, 1.0]), &mut stored).unwrap();
        assert_eq!(stored, flat(&[9.0, 9.0]));
        // A key of another size gets arrays of its own.
        let mut other = flat(&[1.0, 1.0, 1.0]);
        u.update(3, &flat(&[1.0, 1.0, 1.0]), &mut other).unwrap();
        assert_eq!(other, flat(&[0.0; 3]));
    }

    #[test]
    fn a_failed_update_leaves_the_stored_value() {
        let mut u = Mirrored::new(Subtract);
        let mut stored = flat(&[5.0]);
        let err = u.update(9, &flat(&[1.0]), &mut stored).unwrap_err();
        assert!(err.message().contains("key 9"), "{err}");
        assert_eq!(stored, flat(&[5.0]));
    }

    #[test]
    fn a_fused_optimizer_keeps_a_state_per_key() {
        use crate::optim::FusedOptimizer;
        let params = [("learning_rate", "0.1"), ("momentum", "0.9")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let sgd = Arc::new(FusedOptimizer::new("SGD", &params).unwrap());
        let mut u = Mirrored::new(Fused::new(sgd));
        let (mut a, mut b) = (flat(&[1.0, 1.0]), flat(&[1.0, 1.0]));
        let grad = flat(&[1.0, 2.0]);
        u.update(0, &grad, &mut a).unwrap();
        u.update(0, &grad, &mut a).unwrap();
        u.update(1, &grad, &mut b).unwrap();
        // mom = 0.9 mom - 0.1 g; w += mom: two steps for key 0, one for key 1.
        let two = |g: f32| 1.0 - 0.1 * g + (0.9 * -0.1 * g - 0.1 * g);
        let close = |f: &Flat, want: [f32; 2]| {
            let got: Vec<f32> = f
                .bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert!(
                (got[0] - want[0]).abs() < 1e-6 && (got[1] - want[1]).abs() < 1e-6,
                "{got:?}"
            );
        };
        close(&a, [two(1.0), two(2.0)]);
        close(&b, [0.9, 0.8]);
    }
}
