//! A server's optimizers. The built-in ones run as the core's fused update kernels on the
//! store's own bytes, at once on the server's thread ([`Fused`]). Others work on arrays
//! (Python's updater), so [`Mirrored`] keeps a host array of each key's weight and
//! gradient, runs an [`ArrayUpdate`] on them and copies the weight back.

use super::flat::Flat;
use super::store::Updater;
use crate::context::Context;
use crate::dtype::DType;
use crate::error::Error;
use crate::error::Result;
use crate::kvstore::Key;
use crate::ndarray::{NDArray, TBlob};
use crate::optim::{FusedOptimizer, HostArray};
use crate::shape::Shape;
use std::collections::hash_map::Entry;
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
    to.var().note_write();
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

/// A built-in optimizer run as the core's fused updates, on the store's own bytes, with
/// a state per key in host memory.
pub struct Fused {
    optimizer: Arc<FusedOptimizer>,
    /// Per key, the dtype and length the states were made for, and the states.
    states: HashMap<u64, ((DType, usize), Vec<HostArray>)>,
}

impl Fused {
    pub fn new(optimizer: Arc<FusedOptimizer>) -> Fused {
        Fused {
            optimizer,
            states: HashMap::new(),
        }
    }
}

/// Bytes a kernel can read or write as elements of `dtype`: in place when they are
/// aligned for it (as the allocator's and libzmq's buffers are), else through a copy.
enum Elements<'a> {
    InPlace(&'a mut [u8]),
    Copied(&'a mut [u8], HostArray),
}

impl<'a> Elements<'a> {
    fn new(bytes: &'a mut [u8], dtype: DType) -> Elements<'a> {
        if (bytes.as_ptr() as usize).is_multiple_of(dtype.size()) {
            Elements::InPlace(bytes)
        } else {
            let copy = HostArray::copy_of(bytes, dtype);
            Elements::Copied(bytes, copy)
        }
    }

    fn blob(&mut self, dtype: DType) -> TBlob {
        match self {
            Elements::InPlace(b) => {
                let shape = Shape::from_slice(&[b.len() / dtype.size()]);
                TBlob::from_raw(b.as_mut_ptr(), shape, dtype)
            }
            Elements::Copied(_, a) => a.blob(),
        }
    }

    /// Writes a copy back to the bytes it was made from.
    fn finish(self) {
        if let Elements::Copied(bytes, a) = self {
            bytes.copy_from_slice(a.bytes());
        }
    }
}

/// A kernel's view of bytes it only reads, as elements of `dtype`: the bytes themselves
/// when aligned, else a copy kept in `copy`.
fn read_only(bytes: &[u8], dtype: DType, copy: &mut Option<HostArray>) -> TBlob {
    if (bytes.as_ptr() as usize).is_multiple_of(dtype.size()) {
        let shape = Shape::from_slice(&[bytes.len() / dtype.size()]);
        TBlob::from_raw(bytes.as_ptr().cast_mut(), shape, dtype)
    } else {
        copy.insert(HostArray::copy_of(bytes, dtype)).blob()
    }
}

impl Updater for Fused {
    fn update(&mut self, key: u64, merged: &Flat, stored: &mut Flat) -> Result<()> {
        let dtype = stored.dtype;
        if merged.dtype != dtype || merged.len() != stored.len() {
            return Err(Error::Value(format!(
                "KVStore dist: the pushed value of key {key} is {} {}, the stored one {} {}",
                merged.len(),
                merged.dtype,
                stored.len(),
                dtype
            )));
        }
        let mut grad_copy = None;
        let grad = read_only(&merged.bytes, dtype, &mut grad_copy);
        let mut weight = Elements::new(stored.bytes.make_mut(), dtype);
        let weight_blob = weight.blob(dtype);
        let shape = (dtype, weight_blob.size());
        let states = match self.states.entry(key) {
            Entry::Occupied(e) if e.get().0 == shape => &mut e.into_mut().1,
            e => {
                let made = (shape, self.optimizer.create_state_now(&weight_blob)?);
                match e {
                    Entry::Occupied(mut o) => {
                        o.insert(made);
                        &mut o.into_mut().1
                    }
                    Entry::Vacant(v) => &mut v.insert(made).1,
                }
            }
        };
        let state_blobs: Vec<TBlob> = states.iter_mut().map(HostArray::blob).collect();
        let k = Key::Int(key as i64);
        self.optimizer
            .update_now(&k, &weight_blob, &grad, &state_blobs)?;
        weight.finish();
        Ok(())
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
        let params = [("learning_rate", "0.1"), ("momentum", "0.9")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let sgd = Arc::new(FusedOptimizer::new("SGD", &params).unwrap());
        let mut u = Fused::new(sgd);
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

    fn sgd() -> Fused {
        let params = [("learning_rate", "0.5")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Fused::new(Arc::new(FusedOptimizer::new("sgd", &params).unwrap()))
    }

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn updates_change_the_stored_bytes_in_place() {
        let mut u = sgd();
        let mut stored = flat(&[1.0, 2.0]);
        let before = stored.bytes.as_ptr();
        u.update(0, &flat(&[1.0, 1.0]), &mut stored).unwrap();
        assert_eq!(&stored.bytes[..], &bytes(&[0.5, 1.5])[..]);
        assert_eq!(
            stored.bytes.as_ptr(),
            before,
            "no copy of an unshared value"
        );
    }

    #[test]
    fn a_value_a_send_still_reads_is_copied_first() {
        let mut u = sgd();
        let mut stored = flat(&[1.0, 2.0]);
        let sending = stored.bytes.clone();
        u.update(0, &flat(&[2.0, 2.0]), &mut stored).unwrap();
        assert_eq!(&stored.bytes[..], &bytes(&[0.0, 1.0])[..]);
        assert_eq!(&sending[..], &bytes(&[1.0, 2.0])[..]);
    }

    #[test]
    fn unaligned_bytes_are_seen_through_copies() {
        let mut buf = vec![0u8; 1];
        buf.extend(bytes(&[1.0, 2.0, 3.0]));
        // Byte 1 of a fresh allocation is never 4-aligned.
        let mut copy = None;
        let blob = read_only(&buf[1..], DType::F32, &mut copy);
        assert!(copy.is_some());
        assert_eq!(blob.slice_mut::<f32>(), &[1.0, 2.0, 3.0]);
        let mut copy = None;
        read_only(&buf[1..], DType::U8, &mut copy);
        assert!(copy.is_none(), "bytes are always aligned");

        let mut elements = Elements::new(&mut buf[1..], DType::F32);
        assert!(matches!(elements, Elements::Copied(..)));
        elements.blob(DType::F32).slice_mut::<f32>()[1] = 9.0;
        elements.finish();
        assert_eq!(&buf[1..], &bytes(&[1.0, 9.0, 3.0])[..]);
        let mut aligned = bytes(&[4.0]);
        assert!(matches!(
            Elements::new(&mut aligned, DType::F32),
            Elements::InPlace(_)
        ));
    }

    #[test]
    fn a_mismatched_push_leaves_the_stored_value() {
        let mut u = sgd();
        let mut stored = flat(&[1.0, 2.0]);
        let err = u.update(4, &flat(&[1.0]), &mut stored).unwrap_err();
        assert!(err.message().contains("key 4"), "{err}");
        assert_eq!(&stored.bytes[..], &bytes(&[1.0, 2.0])[..]);
    }
}
