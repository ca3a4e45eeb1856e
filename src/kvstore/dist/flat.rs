//! The server's values: flat arrays of one dtype in little-endian bytes (a server never
//! learns shapes), and the sums its sync rounds take. The bytes are shared with the
//! frames that send them, so a pull is answered without a copy.

use super::frame::SharedBytes;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use half::f16;

/// A flat array as a server stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct Flat {
    pub dtype: DType,
    pub bytes: SharedBytes,
}

macro_rules! add_as {
    ($t:ty, $acc:expr, $x:expr, $add:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (a, b) in $acc.chunks_exact_mut(N).zip($x.chunks_exact(N)) {
            let sum: $t = $add(
                <$t>::from_le_bytes(a.try_into().expect("N bytes")),
                <$t>::from_le_bytes(b.try_into().expect("N bytes")),
            );
            a.copy_from_slice(&sum.to_le_bytes());
        }
    }};
}

macro_rules! each_as {
    ($t:ty, $bytes:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        $bytes
            .chunks_exact(N)
            .map(|c| <$t>::from_le_bytes(c.try_into().expect("N bytes")).to_f64())
            .collect()
    }};
}

macro_rules! from_as {
    ($t:ty, $values:expr) => {
        $values
            .iter()
            .flat_map(|v| <$t as Element>::from_f64(*v).to_le_bytes())
            .collect()
    };
}

/// `acc += other` as float32 arrays in little-endian bytes; vectorised where both are
/// aligned to 4 bytes, as the buffers libzmq and the allocator hand out are.
fn add_f32(acc: &mut [u8], other: &[u8]) {
    if cfg!(target_endian = "little") {
        if let (Ok(a), Ok(b)) = (
            bytemuck::try_cast_slice_mut::<u8, f32>(acc),
            bytemuck::try_cast_slice::<u8, f32>(other),
        ) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += *y;
            }
            return;
        }
    }
    add_as!(f32, acc, other, |a: f32, b: f32| a + b)
}

impl Flat {
    /// `bytes` as an array of `dtype`; an error if they are not whole elements.
    pub fn new(dtype: DType, bytes: impl Into<SharedBytes>) -> Result<Flat> {
        let bytes = bytes.into();
        if dtype == DType::Bool || !bytes.len().is_multiple_of(dtype.size()) {
            return Err(Error::Value(format!(
                "KVStore dist: {} bytes are not an array of {dtype}",
                bytes.len()
            )));
        }
        Ok(Flat { dtype, bytes })
    }

    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The array converted to `dtype` (through double precision, as a cast).
    pub fn cast(&self, dtype: DType) -> Result<Flat> {
        if dtype == self.dtype {
            return Ok(self.clone());
        }
        let values: Vec<f64> = match self.dtype {
            DType::F32 => each_as!(f32, self.bytes),
            DType::F64 => each_as!(f64, self.bytes),
            DType::F16 => each_as!(f16, self.bytes),
            DType::U8 => each_as!(u8, self.bytes),
            DType::I8 => each_as!(i8, self.bytes),
            DType::I32 => each_as!(i32, self.bytes),
            DType::I64 => each_as!(i64, self.bytes),
            DType::Bool => unreachable!("Flat::new refuses bool"),
        };
        let bytes: Vec<u8> = match dtype {
            DType::F32 => from_as!(f32, values),
            DType::F64 => from_as!(f64, values),
            DType::F16 => from_as!(f16, values),
            DType::U8 => from_as!(u8, values),
            DType::I8 => from_as!(i8, values),
            DType::I32 => from_as!(i32, values),
            DType::I64 => from_as!(i64, values),
            DType::Bool => {
                return Err(Error::Value(
                    "KVStore dist: a server stores no bool arrays".into(),
                ))
            }
        };
        Ok(Flat {
            dtype,
            bytes: bytes.into(),
        })
    }

    /// Adds `other` (same dtype and length) element by element: floats as IEEE sums
    /// (half precision through single, rounded once), integers wrapping.
    pub fn add_assign(&mut self, other: &[u8]) -> Result<()> {
        if other.len() != self.bytes.len() {
            return Err(Error::Value(format!(
                "KVStore dist: cannot add {} bytes to a stored array of {} bytes",
                other.len(),
                self.bytes.len()
            )));
        }
        let acc = self.bytes.make_mut();
        match self.dtype {
            DType::F32 => add_f32(acc, other),
            DType::F64 => add_as!(f64, acc, other, |a: f64, b: f64| a + b),
            DType::F16 => {
                for (a, b) in acc.chunks_exact_mut(2).zip(other.chunks_exact(2)) {
                    let x = f16::from_le_bytes([a[0], a[1]]).to_f32();
                    let y = f16::from_le_bytes([b[0], b[1]]).to_f32();
                    a.copy_from_slice(&f16::from_f32(x + y).to_le_bytes());
                }
            }
            DType::U8 => add_as!(u8, acc, other, u8::wrapping_add),
            DType::I8 => add_as!(i8, acc, other, i8::wrapping_add),
            DType::I32 => add_as!(i32, acc, other, i32::wrapping_add),
            DType::I64 => add_as!(i64, acc, other, i64::wrapping_add),
            DType::Bool => unreachable!("Flat::new refuses bool"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
        v.iter().flat_map(|x| f(*x)).collect()
    }

    #[test]
    fn sums_follow_each_dtype() {
        let mut a = Flat::new(
            DType::F32,
            bytes(&[1.5f32, -2.0], |x| x.to_le_bytes().to_vec()),
        )
        .unwrap();
        a.add_assign(&bytes(&[0.25f32, 2.0], |x| x.to_le_bytes().to_vec()))
            .unwrap();
        assert_eq!(
            &a.bytes[..],
            bytes(&[1.75f32, 0.0], |x| x.to_le_bytes().to_vec())
        );
        assert_eq!(a.len(), 2);

        let mut h = Flat::new(DType::F16, f16::from_f32(2048.0).to_le_bytes().to_vec()).unwrap();
        h.add_assign(&f16::from_f32(1.0).to_le_bytes()).unwrap();
        // 2049 is not a half: single precision sums, then one rounding (to even).
        assert_eq!(&h.bytes[..], f16::from_f32(2048.0).to_le_bytes());

        let mut i = Flat::new(DType::I8, vec![127u8, 1]).unwrap();
        i.add_assign(&[1, 2]).unwrap();
        assert_eq!(&i.bytes[..], [0x80, 3], "integers wrap");

        let mut l = Flat::new(DType::I64, bytes(&[5i64], |x| x.to_le_bytes().to_vec())).unwrap();
        l.add_assign(&bytes(&[-7i64], |x| x.to_le_bytes().to_vec()))
            .unwrap();
        assert_eq!(&l.bytes[..], (-2i64).to_le_bytes());
    }

    #[test]
    fn float32_sums_agree_aligned_or_not() {
        let x: Vec<f32> = (0..37).map(|i| i as f32 * 0.5 - 3.0).collect();
        let y: Vec<f32> = (0..37).map(|i| 1.0 / (i as f32 + 1.0)).collect();
        let want = bytes(
            &x.iter().zip(&y).map(|(a, b)| a + b).collect::<Vec<_>>(),
            |v: f32| v.to_le_bytes().to_vec(),
        );
        let yb = bytes(&y, |v| v.to_le_bytes().to_vec());
        let mut aligned = Flat::new(DType::F32, bytes(&x, |v| v.to_le_bytes().to_vec())).unwrap();
        aligned.add_assign(&yb).unwrap();
        assert_eq!(&aligned.bytes[..], want);
        // One byte in: the values no longer sit on 4-byte boundaries.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&yb);
        let mut acc = Flat::new(DType::F32, bytes(&x, |v| v.to_le_bytes().to_vec())).unwrap();
        acc.add_assign(&shifted[1..]).unwrap();
        assert_eq!(&acc.bytes[..], want);
    }

    #[test]
    fn casts_go_through_double_precision() {
        let h = Flat::new(
            DType::F16,
            bytes(&[1.5f32, -2.25], |x| {
                f16::from_f32(x).to_le_bytes().to_vec()
            }),
        )
        .unwrap();
        let w = h.cast(DType::F32).unwrap();
        assert_eq!(
            &w.bytes[..],
            bytes(&[1.5f32, -2.25], |x| x.to_le_bytes().to_vec())
        );
        assert_eq!(w.cast(DType::F16).unwrap(), h);
        assert_eq!(
            &w.cast(DType::I32).unwrap().bytes[..],
            bytes(&[1i32, -2], |x| x.to_le_bytes().to_vec())
        );
        assert!(w.cast(DType::Bool).is_err());
    }

    #[test]
    fn sizes_that_do_not_fit_are_refused() {
        assert!(Flat::new(DType::F32, vec![0; 6]).is_err());
        assert!(Flat::new(DType::Bool, vec![0; 4]).is_err());
        let mut a = Flat::new(DType::F64, vec![0; 16]).unwrap();
        let e = a.add_assign(&[0; 8]).unwrap_err().to_string();
        assert!(
            e.contains("cannot add 8 bytes to a stored array of 16 bytes"),
            "{e}"
        );
    }
}
