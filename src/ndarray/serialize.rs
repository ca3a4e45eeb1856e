//! MXNet's NDArray binary format: single-array records and the `.params` list file.
//!
//! Layout (all integers little-endian), as MXNet 1.9.1 writes and reads it:
//!
//! List file (`mx.nd.save`, `.params`):
//! `u64 0x112` (`kMXAPINDArrayListMagic`), `u64 0` (reserved), `u64 n`, `n` array records,
//! `u64 m` (0 for a list, `n` for a dict), `m` names as `u64 len` + UTF-8 bytes.
//!
//! Array record, by its leading `u32`:
//! - `0xF993FAC9` (V2) or `0xF993FACA` (V3, written under numpy shape semantics):
//!   `i32 storage type` (0 dense, 1 row_sparse, 2 csr; sparse records carry a storage
//!   shape here and aux types/shapes/data further on), shape as `i32 ndim` + `ndim` × `i64`,
//!   context as `i32 dev_type` + `i32 dev_id`, `i32 type flag`, then the row-major data.
//! - `0xF993FAC8` (V1): shape (`i32 ndim` + `i64` dims), context, type flag, data.
//! - anything else (legacy): the `u32` is `ndim`, then `ndim` × `u32` dims, context, type flag,
//!   data.
//!
//! A shape of `ndim` 0 is a 0-d array with one element: MXNet 1.9.1 writes the context, type
//! flag and one element after it (and reads them for V1 and legacy records, though its V2
//! reader stops there and so cannot read back the 0-d arrays it writes). Zero-size arrays keep
//! their 0 dims and have no data bytes.

use crate::context::{Context, DeviceType};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// `kMXAPINDArrayListMagic`: the first `u64` of a list file.
pub const LIST_MAGIC: u64 = 0x112;
/// Record magic of version 1 (`int64` shape dims, no storage type).
pub const NDARRAY_V1_MAGIC: u32 = 0xF993_FAC8;
/// Record magic of version 2 (with storage type); what `mx.nd.save` writes.
pub const NDARRAY_V2_MAGIC: u32 = 0xF993_FAC9;
/// Record magic of version 3 (numpy shape semantics; dense only); what `mx.npx.save` writes.
pub const NDARRAY_V3_MAGIC: u32 = 0xF993_FACA;

/// A dense array as stored in a file, independent of the NDArray type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedArray {
    /// Dimension sizes, outermost first; empty for a 0-d array.
    pub shape: Vec<usize>,
    /// The context the array was saved from.
    pub ctx: Context,
    /// Element type.
    pub dtype: DType,
    /// Elements, little-endian and row-major: `shape.product() * dtype.size()` bytes.
    pub data: Vec<u8>,
}

impl SavedArray {
    /// A saved array, checking that `data` has exactly the bytes the shape and dtype need.
    pub fn new(shape: Vec<usize>, ctx: Context, dtype: DType, data: Vec<u8>) -> Result<SavedArray> {
        let a = SavedArray {
            shape,
            ctx,
            dtype,
            data,
        };
        a.check()?;
        Ok(a)
    }

    /// Number of elements (1 for a 0-d array), saturating at `usize::MAX`.
    pub fn num_elements(&self) -> usize {
        if self.shape.contains(&0) {
            return 0;
        }
        self.shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .unwrap_or(usize::MAX)
    }

    fn check(&self) -> Result<()> {
        let expected = byte_len(&self.shape, self.dtype).ok_or_else(|| {
            Error::Value(format!(
                "array of shape {:?} and dtype {} is too large",
                self.shape, self.dtype
            ))
        })?;
        if expected != self.data.len() {
            return Err(Error::Value(format!(
                "array of shape {:?} and dtype {} needs {} data bytes, but has {}",
                self.shape,
                self.dtype,
                expected,
                self.data.len()
            )));
        }
        Ok(())
    }
}

/// The format of one array record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordVersion {
    /// No magic: `u32 ndim` and `u32` dims (MXNet before V1).
    Legacy,
    /// `NDARRAY_V1_MAGIC`.
    V1,
    /// `NDARRAY_V2_MAGIC`: what `mx.nd.save` writes.
    V2,
    /// `NDARRAY_V3_MAGIC`: what MXNet writes under numpy shape semantics (`mx.npx.save`).
    V3,
}

/// Number of data bytes of an array, or `None` when it does not fit in `usize`.
fn byte_len(shape: &[usize], dtype: DType) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
}

/// Storage type name for MXNet's storage type number.
fn storage_name(stype: i32) -> Option<&'static str> {
    match stype {
        0 => Some("default"),
        1 => Some("row_sparse"),
        2 => Some("csr"),
        _ => None,
    }
}

/// The dtype for a type flag read from a file at `offset`.
fn dtype_from_file_flag(flag: i32, offset: usize) -> Result<DType> {
    if let Some(d) = DType::ALL.iter().copied().find(|d| d.flag() == flag) {
        return Ok(d);
    }
    let mxnet_only = match flag {
        8 => Some("int16"),
        9 => Some("uint16"),
        10 => Some("uint32"),
        11 => Some("uint64"),
        12 => Some("bfloat16"),
        _ => None,
    };
    match mxnet_only {
        Some(name) => Err(Error::NotImplemented(format!(
            "NDArray file: dtype {name} (type flag {flag} at byte offset {offset}) is not supported"
        ))),
        None => Err(Error::Value(format!(
            "corrupt NDArray file: unknown dtype flag {flag} at byte offset {offset}"
        ))),
    }
}

/// A cursor over the bytes of a file that never reads past the end and reports byte offsets.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Byte offset of the next read.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when every byte has been read.
    pub fn is_at_end(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes; `what` names them in the error when fewer remain.
    pub fn read_bytes(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let rem = self.remaining();
        match usize::try_from(n) {
            Ok(n) if n <= rem => {
                let out = &self.buf[self.pos..self.pos + n];
                self.pos += n;
                Ok(out)
            }
            _ => Err(Error::Value(format!(
                "truncated NDArray file: {what} needs {n} bytes at byte offset {}, \
                 but only {rem} remain",
                self.pos
            ))),
        }
    }

    fn read_array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let bytes = self.read_bytes(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// A little-endian `u32`.
    pub fn read_u32(&mut self, what: &str) -> Result<u32> {
        self.read_array(what).map(u32::from_le_bytes)
    }

    /// A little-endian `i32`.
    pub fn read_i32(&mut self, what: &str) -> Result<i32> {
        self.read_array(what).map(i32::from_le_bytes)
    }

    /// A little-endian `u64`.
    pub fn read_u64(&mut self, what: &str) -> Result<u64> {
        self.read_array(what).map(u64::from_le_bytes)
    }

    /// A little-endian `i64`.
    pub fn read_i64(&mut self, what: &str) -> Result<i64> {
        self.read_array(what).map(i64::from_le_bytes)
    }

    /// A string stored as `u64` length and UTF-8 bytes (dmlc's `std::string` format).
    pub fn read_string(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let len = self.read_u64(what)?;
        let bytes = self.read_bytes(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| {
            Error::Value(format!(
                "corrupt NDArray file: {what} at byte offset {at} is not valid UTF-8"
            ))
        })
    }
}

/// Appends a little-endian `u64`.
fn put_u64(w: &mut Vec<u8>, v: u64) {
    w.extend_from_slice(&v.to_le_bytes());
}

/// Appends a little-endian `i32`.
fn put_i32(w: &mut Vec<u8>, v: i32) {
    w.extend_from_slice(&v.to_le_bytes());
}

/// Appends one array record in the V2 format, as `mx.nd.save` writes it.
pub fn save_array(w: &mut Vec<u8>, a: &SavedArray) -> Result<()> {
    save_array_as(w, a, RecordVersion::V2)
}

/// Appends one array record in the given format. Nothing is appended on error.
pub fn save_array_as(w: &mut Vec<u8>, a: &SavedArray, version: RecordVersion) -> Result<()> {
    a.check()?;
    let ndim = i32::try_from(a.shape.len())
        .map_err(|_| Error::Value(format!("cannot save an array of {} dims", a.shape.len())))?;
    let mut rec = Vec::with_capacity(32 + 8 * a.shape.len() + a.data.len());
    match version {
        RecordVersion::Legacy => {
            let dims = a
                .shape
                .iter()
                .map(|&d| u32::try_from(d))
                .collect::<std::result::Result<Vec<u32>, _>>()
                .map_err(|_| {
                    Error::Value(format!(
                        "shape {:?} does not fit the legacy record format",
                        a.shape
                    ))
                })?;
            // ndim is the record's first word, so it must not be mistaken for a magic number.
            rec.extend_from_slice(&(ndim as u32).to_le_bytes());
            for d in dims {
                rec.extend_from_slice(&d.to_le_bytes());
            }
        }
        RecordVersion::V1 | RecordVersion::V2 | RecordVersion::V3 => {
            let magic = match version {
                RecordVersion::V1 => NDARRAY_V1_MAGIC,
                RecordVersion::V2 => NDARRAY_V2_MAGIC,
                _ => NDARRAY_V3_MAGIC,
            };
            rec.extend_from_slice(&magic.to_le_bytes());
            if version != RecordVersion::V1 {
                put_i32(&mut rec, 0); // dense storage
            }
            put_i32(&mut rec, ndim);
            for &d in &a.shape {
                let d = i64::try_from(d)
                    .map_err(|_| Error::Value(format!("dimension {d} is too large to save")))?;
                rec.extend_from_slice(&d.to_le_bytes());
            }
        }
    }
    put_i32(&mut rec, a.ctx.dev_type as i32);
    put_i32(&mut rec, a.ctx.dev_id);
    put_i32(&mut rec, a.dtype.flag());
    rec.extend_from_slice(&a.data);
    w.extend_from_slice(&rec);
    Ok(())
}

/// Reads one array record (any version).
pub fn load_array(r: &mut Reader) -> Result<SavedArray> {
    load_array_versioned(r).map(|(a, _)| a)
}

/// Reads one array record (any version) and says which version it was.
pub fn load_array_versioned(r: &mut Reader) -> Result<(SavedArray, RecordVersion)> {
    let start = r.offset();
    let magic = r.read_u32("NDArray record magic")?;
    let version = match magic {
        NDARRAY_V1_MAGIC => RecordVersion::V1,
        NDARRAY_V2_MAGIC => RecordVersion::V2,
        NDARRAY_V3_MAGIC => RecordVersion::V3,
        _ => RecordVersion::Legacy,
    };
    let shape = match version {
        RecordVersion::Legacy => {
            // The first word is the number of dims, each a u32.
            let ndim = magic as usize;
            if ndim > r.remaining() / 4 {
                return Err(Error::Value(format!(
                    "corrupt NDArray file: the record at byte offset {start} starts with \
                     0x{magic:08X}, which is neither a record magic number \
                     (0x{NDARRAY_V2_MAGIC:08X}, 0x{NDARRAY_V3_MAGIC:08X} or 0x{NDARRAY_V1_MAGIC:08X}) \
                     nor the dimension count of a legacy record ({} bytes remain)",
                    r.remaining()
                )));
            }
            let mut shape = Vec::new();
            for _ in 0..ndim {
                shape.push(r.read_u32("legacy shape dimension")? as usize);
            }
            shape
        }
        RecordVersion::V1 => read_shape(r, "shape")?,
        RecordVersion::V2 | RecordVersion::V3 => {
            let at = r.offset();
            let stype = r.read_i32("storage type")?;
            match storage_name(stype) {
                Some("default") => {}
                Some(name) => {
                    return Err(Error::NotImplemented(format!(
                        "NDArray file: loading arrays of storage type {name} is not supported \
                         (record at byte offset {start})"
                    )))
                }
                None => {
                    return Err(Error::Value(format!(
                        "corrupt NDArray file: unknown storage type {stype} at byte offset {at}"
                    )))
                }
            }
            read_shape(r, "shape")?
        }
    };
    let at = r.offset();
    let dev_type = r.read_i32("context device type")?;
    let dev_type = DeviceType::from_i32(dev_type).ok_or_else(|| {
        Error::Value(format!(
            "corrupt NDArray file: unknown device type {dev_type} at byte offset {at}"
        ))
    })?;
    let dev_id = r.read_i32("context device id")?;
    let at = r.offset();
    let flag = r.read_i32("dtype flag")?;
    let dtype = dtype_from_file_flag(flag, at)?;
    let at = r.offset();
    let nbytes = byte_len(&shape, dtype).ok_or_else(|| {
        Error::Value(format!(
            "corrupt NDArray file: shape {shape:?} of the record at byte offset {start} \
             is absurdly large"
        ))
    })?;
    if nbytes > r.remaining() {
        return Err(Error::Value(format!(
            "truncated NDArray file: array data of shape {shape:?} and dtype {dtype} needs \
             {nbytes} bytes at byte offset {at}, but only {} remain",
            r.remaining()
        )));
    }
    let data = r.read_bytes(nbytes as u64, "array data")?.to_vec();
    let ctx = Context { dev_type, dev_id };
    Ok((
        SavedArray {
            shape,
            ctx,
            dtype,
            data,
        },
        version,
    ))
}

/// Reads an `i32 ndim` + `i64` dims shape (V1, V2 and V3 records).
fn read_shape(r: &mut Reader, what: &str) -> Result<Vec<usize>> {
    let at = r.offset();
    let ndim = r.read_i32(what)?;
    if ndim < 0 {
        return Err(Error::Value(format!(
            "corrupt NDArray file: {what} at byte offset {at} has ndim {ndim} (an unknown shape)"
        )));
    }
    let ndim = ndim as usize;
    if ndim > r.remaining() / 8 {
        return Err(Error::Value(format!(
            "truncated NDArray file: {what} at byte offset {at} has {ndim} dims, which need {} \
             bytes, but only {} remain",
            ndim as u64 * 8,
            r.remaining()
        )));
    }
    let mut shape = Vec::with_capacity(ndim);
    for _ in 0..ndim {
        let at = r.offset();
        let d = r.read_i64("shape dimension")?;
        let d = usize::try_from(d).map_err(|_| {
            Error::Value(format!(
                "corrupt NDArray file: shape dimension {d} at byte offset {at} is not a valid size"
            ))
        })?;
        shape.push(d);
    }
    Ok(shape)
}

/// A list file (what `mx.nd.save` writes) of `arrays`, with `names` for a dict or none for a list.
pub fn save_list(arrays: &[SavedArray], names: &[String]) -> Result<Vec<u8>> {
    save_list_as(arrays, names, RecordVersion::V2)
}

/// A list file whose records are in the given format (V3 is what `mx.npx.save` writes).
pub fn save_list_as(
    arrays: &[SavedArray],
    names: &[String],
    version: RecordVersion,
) -> Result<Vec<u8>> {
    if !names.is_empty() && names.len() != arrays.len() {
        return Err(Error::Value(format!(
            "cannot save {} arrays with {} names",
            arrays.len(),
            names.len()
        )));
    }
    let mut w = Vec::new();
    put_u64(&mut w, LIST_MAGIC);
    put_u64(&mut w, 0);
    put_u64(&mut w, arrays.len() as u64);
    for a in arrays {
        save_array_as(&mut w, a, version)?;
    }
    put_u64(&mut w, names.len() as u64);
    for n in names {
        put_u64(&mut w, n.len() as u64);
        w.extend_from_slice(n.as_bytes());
    }
    Ok(w)
}

/// Reads a list file: the arrays and their names (empty when the file holds a list).
pub fn load_list(bytes: &[u8]) -> Result<(Vec<SavedArray>, Vec<String>)> {
    let mut r = Reader::new(bytes);
    let header = r.read_u64("file header")?;
    if header != LIST_MAGIC {
        return Err(Error::Value(format!(
            "not an MXNet NDArray file: bad magic 0x{header:X} at byte offset 0 \
             (expected 0x{LIST_MAGIC:X})"
        )));
    }
    r.read_u64("reserved header word")?;
    let count = r.read_u64("array count")?;
    let mut arrays = Vec::new();
    for i in 0..count {
        let at = r.offset();
        let a = load_array(&mut r).map_err(|e| {
            e.with_prefix(&format!(
                "array {i} of {count} (record at byte offset {at}): "
            ))
        })?;
        arrays.push(a);
    }
    let at = r.offset();
    let nnames = r.read_u64("name count")?;
    if nnames != 0 && nnames != count {
        return Err(Error::Value(format!(
            "corrupt NDArray file: {nnames} names for {count} arrays at byte offset {at}"
        )));
    }
    let mut names = Vec::new();
    for _ in 0..nnames {
        names.push(r.read_string("array name")?);
    }
    if !r.is_at_end() {
        return Err(Error::Value(format!(
            "corrupt NDArray file: {} unexpected bytes after the end of the data at byte offset {}",
            r.remaining(),
            r.offset()
        )));
    }
    Ok((arrays, names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::unhex;

    fn arr(shape: &[usize], dtype: DType, seed: u8) -> SavedArray {
        let n = byte_len(shape, dtype).unwrap();
        let data = (0..n)
            .map(|i| {
                let b = (i as u8).wrapping_mul(31).wrapping_add(seed);
                if dtype == DType::Bool {
                    b & 1
                } else {
                    b
                }
            })
            .collect();
        SavedArray::new(shape.to_vec(), Context::cpu(0), dtype, data).unwrap()
    }

    fn small_file() -> Vec<u8> {
        let arrays = vec![
            arr(&[2, 3], DType::F32, 1),
            arr(&[], DType::I64, 2),
            arr(&[0, 4], DType::F16, 3),
        ];
        let names = vec!["arg:w".to_string(), "aux:b".to_string(), "z".to_string()];
        save_list(&arrays, &names).unwrap()
    }

    /// The exact bytes MXNet 1.9.1 writes for
    /// `mx.nd.save(f, {'w': mx.nd.arange(6).reshape((2, 3))})`.
    const MXNET_DICT: &str =
        "1201000000000000 0000000000000000 0100000000000000 c9fa93f9 00000000 \
        02000000 0200000000000000 0300000000000000 01000000 00000000 00000000 \
        00000000 0000803f 00000040 00004040 00008040 0000a040 \
        0100000000000000 0100000000000000 77";

    #[test]
    fn matches_mxnet_bytes() {
        let bytes = unhex(MXNET_DICT);
        let (arrays, names) = load_list(&bytes).unwrap();
        assert_eq!(names, vec!["w".to_string()]);
        assert_eq!(arrays.len(), 1);
        let a = &arrays[0];
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.dtype, DType::F32);
        assert_eq!(a.ctx, Context::cpu(0));
        let vals: Vec<f32> = a
            .data
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(vals, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(save_list(&arrays, &names).unwrap(), bytes);
    }

    #[test]
    fn round_trip_every_dtype_and_shape() {
        for (i, dtype) in DType::ALL.iter().copied().enumerate() {
            for shape in [
                &[][..],
                &[0][..],
                &[5][..],
                &[2, 0, 3][..],
                &[2, 3, 4][..],
                &[1, 2, 3, 2][..],
            ] {
                let a = arr(shape, dtype, i as u8);
                for version in [
                    RecordVersion::Legacy,
                    RecordVersion::V1,
                    RecordVersion::V2,
                    RecordVersion::V3,
                ] {
                    let mut w = Vec::new();
                    save_array_as(&mut w, &a, version).unwrap();
                    let mut r = Reader::new(&w);
                    let (b, v) = load_array_versioned(&mut r).unwrap();
                    assert_eq!(a, b);
                    assert_eq!(v, version);
                    assert!(r.is_at_end());
                }
            }
            let list = vec![arr(&[3], dtype, 7), arr(&[2, 2], dtype, 9)];
            let bytes = save_list(&list, &[]).unwrap();
            let (back, names) = load_list(&bytes).unwrap();
            assert_eq!(back, list);
            assert!(names.is_empty());
        }
    }

    #[test]
    fn contexts_are_kept() {
        let mut a = arr(&[2], DType::F32, 0);
        a.ctx = Context::gpu(1);
        let bytes = save_list(std::slice::from_ref(&a), &[]).unwrap();
        // ctx follows the header (24), magic, stype, ndim and one dim (20).
        assert_eq!(&bytes[44..52], &[2, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(load_list(&bytes).unwrap().0[0].ctx, Context::gpu(1));
        a.ctx = Context {
            dev_type: DeviceType::CpuShared,
            dev_id: 3,
        };
        let bytes = save_list(std::slice::from_ref(&a), &[]).unwrap();
        assert_eq!(load_list(&bytes).unwrap().0[0].ctx, a.ctx);
    }

    #[test]
    fn empty_list() {
        let bytes = save_list(&[], &[]).unwrap();
        assert_eq!(bytes.len(), 32);
        let (a, n) = load_list(&bytes).unwrap();
        assert!(a.is_empty() && n.is_empty());
    }

    #[test]
    fn truncation_at_every_offset_is_a_value_error() {
        let bytes = small_file();
        for cut in 0..bytes.len() {
            match load_list(&bytes[..cut]) {
                Err(Error::Value(msg)) => assert!(msg.contains("byte offset"), "{msg}"),
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        assert!(load_list(&bytes).is_ok());
    }

    #[test]
    fn bad_magic() {
        let mut bytes = small_file();
        bytes[0] = 0x13;
        let err = load_list(&bytes).unwrap_err();
        assert!(matches!(err, Error::Value(_)));
        assert!(err.message().contains("bad magic"), "{err}");
        assert!(err.message().contains("byte offset 0"), "{err}");
    }

    #[test]
    fn bad_record_magic_and_fields() {
        let good = small_file();
        // Record magic replaced by a word that is no magic and no plausible legacy ndim.
        let mut b = good.clone();
        b[24..28].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
        let err = load_list(&b).unwrap_err();
        assert!(matches!(err, Error::Value(_)), "{err:?}");
        assert!(err.message().contains("byte offset 24"), "{err}");
        // Unknown dtype flag (offset: header 24 + magic, stype, ndim, 2 dims, ctx = 24 + 36).
        let mut b = good.clone();
        b[60..64].copy_from_slice(&99i32.to_le_bytes());
        let err = load_list(&b).unwrap_err();
        assert!(matches!(err, Error::Value(_)), "{err:?}");
        assert!(
            err.message().contains("dtype flag 99 at byte offset 60"),
            "{err}"
        );
        // bfloat16 is MXNet's, but not ours.
        b[60..64].copy_from_slice(&12i32.to_le_bytes());
        assert!(matches!(load_list(&b), Err(Error::NotImplemented(_))));
        // Unknown device type.
        let mut b = good.clone();
        b[52..56].copy_from_slice(&9i32.to_le_bytes());
        assert!(matches!(load_list(&b), Err(Error::Value(_))));
        // Negative dim, negative ndim, huge ndim, huge dims.
        let mut b = good.clone();
        b[36..44].copy_from_slice(&(-3i64).to_le_bytes());
        assert!(matches!(load_list(&b), Err(Error::Value(_))));
        let mut b = good.clone();
        b[32..36].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(matches!(load_list(&b), Err(Error::Value(_))));
        b[32..36].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(matches!(load_list(&b), Err(Error::Value(_))));
        let mut b = good.clone();
        b[36..44].copy_from_slice(&i64::MAX.to_le_bytes());
        b[44..52].copy_from_slice(&i64::MAX.to_le_bytes());
        assert!(matches!(load_list(&b), Err(Error::Value(_))));
        let mut b = good.clone();
        b[36..44].copy_from_slice(&(1i64 << 40).to_le_bytes());
        assert!(matches!(load_list(&b), Err(Error::Value(_))));
        // Huge array count and name count.
        let mut b = good.clone();
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(load_list(&b), Err(Error::Value(_))));
        // Trailing garbage.
        let mut b = good.clone();
        b.push(0);
        assert!(matches!(load_list(&b), Err(Error::Value(_))));
    }

    #[test]
    fn names_must_match_arrays() {
        let a = arr(&[1], DType::F32, 0);
        assert!(save_list(&[a.clone(), a.clone()], &["x".to_string()]).is_err());
        let mut bytes = save_list(&[a.clone(), a], &[]).unwrap();
        let n = bytes.len();
        bytes[n - 8..].copy_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.push(b'x');
        assert!(matches!(load_list(&bytes), Err(Error::Value(_))));
    }

    #[test]
    fn invalid_utf8_name() {
        let a = arr(&[1], DType::U8, 0);
        let mut bytes = save_list(&[a], &["x".to_string()]).unwrap();
        let n = bytes.len();
        bytes[n - 1] = 0xFF;
        assert!(matches!(load_list(&bytes), Err(Error::Value(_))));
    }

    #[test]
    fn sparse_is_not_implemented() {
        // What MXNet 1.9.1 writes for a 2x2 row_sparse array.
        let rs = unhex(
            "120100000000000000000000000000000100000000000000c9fa93f9010000000200000000000000\
             000000000200000000000000020000000200000000000000020000000000000001000000000000000000\
             0000060000000100000001000000000000000000803f00000040010000000000000000000000000000\
             00",
        );
        let err = load_list(&rs).unwrap_err();
        assert!(matches!(err, Error::NotImplemented(_)), "{err:?}");
        assert!(err.message().contains("row_sparse"), "{err}");
        let mut cs = rs.clone();
        cs[28] = 2;
        let err = load_list(&cs).unwrap_err();
        assert!(err.message().contains("csr"), "{err}");
        cs[28] = 7;
        assert!(matches!(load_list(&cs), Err(Error::Value(_))));
    }

    #[test]
    fn zero_d_record_has_one_element() {
        // mx.nd.save of mx.nd.array(np.float32(3)): V2, ndim 0, then ctx, flag and 4 bytes.
        let bytes = unhex(
            "1201000000000000 0000000000000000 0100000000000000 c9fa93f9 00000000 00000000 \
             01000000 00000000 00000000 00004040 0000000000000000",
        );
        let (arrays, names) = load_list(&bytes).unwrap();
        assert!(names.is_empty());
        assert_eq!(arrays[0].shape, Vec::<usize>::new());
        assert_eq!(arrays[0].data, 3.0f32.to_le_bytes().to_vec());
        assert_eq!(save_list(&arrays, &names).unwrap(), bytes);
    }

    #[test]
    fn save_checks_data_length() {
        let bad = SavedArray {
            shape: vec![2, 2],
            ctx: Context::cpu(0),
            dtype: DType::F32,
            data: vec![0; 15],
        };
        let mut w = Vec::new();
        assert!(save_array(&mut w, &bad).is_err());
        assert!(w.is_empty());
        assert!(SavedArray::new(vec![2, 2], Context::cpu(0), DType::F32, vec![0; 15]).is_err());
    }

    #[test]
    fn random_corruption_never_panics() {
        let good = small_file();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let mut b = good.clone();
            let flips = 1 + next() % 4;
            for _ in 0..flips {
                let i = (next() % b.len() as u64) as usize;
                b[i] = next() as u8;
            }
            let cut = (next() % (b.len() as u64 + 1)) as usize;
            let _ = load_list(&b);
            let _ = load_list(&b[..cut]);
        }
    }

    #[test]
    fn mxnet_fixture_files() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
        let read = |name: &str| std::fs::read(format!("{dir}{name}")).unwrap();
        // Written by mx.nd.save: loads, and saves back to the same bytes.
        for (file, n, dict) in [
            ("dict_all_dtypes.params", 11, true),
            ("list.params", 3, false),
            ("single.params", 1, false),
            ("zero_d.params", 2, false),
            ("gpu_ctx.params", 1, true),
        ] {
            let bytes = read(file);
            let (arrays, names) = load_list(&bytes).unwrap();
            assert_eq!(arrays.len(), n, "{file}");
            assert_eq!(names.len(), if dict { n } else { 0 }, "{file}");
            assert_eq!(save_list(&arrays, &names).unwrap(), bytes, "{file}");
        }
        let (arrays, names) = load_list(&read("dict_all_dtypes.params")).unwrap();
        let dtypes: Vec<DType> = arrays.iter().map(|a| a.dtype).collect();
        for d in DType::ALL {
            assert!(dtypes.contains(&d), "{d}");
        }
        assert_eq!(names[0], "arg:w_float32");
        assert_eq!(names[10], "n\u{e4}me \u{fc}nicode");
        assert_eq!(arrays[9].shape, vec![2, 0, 3]);
        assert!(arrays[9].data.is_empty());
        let (arrays, _) = load_list(&read("list.params")).unwrap();
        assert_eq!(arrays[1].ctx, Context::cpu(1));
        let (arrays, _) = load_list(&read("gpu_ctx.params")).unwrap();
        assert_eq!(arrays[0].ctx, Context::gpu(0));
        let (arrays, _) = load_list(&read("zero_d.params")).unwrap();
        assert!(arrays[0].shape.is_empty());
        // Written by mx.npx.save: V3 records.
        let bytes = read("npx_v3.params");
        let (arrays, names) = load_list(&bytes).unwrap();
        assert_eq!(names, ["scalar", "vec", "empty_2x0"]);
        assert!(arrays[0].shape.is_empty());
        assert_eq!(arrays[0].data, 5.0f32.to_le_bytes());
        assert_eq!(
            save_list_as(&arrays, &names, RecordVersion::V3).unwrap(),
            bytes
        );
        // Hand-built V1 and legacy records.
        let legacy = read("legacy_v1.params");
        let mut r = Reader::new(&legacy[24..]);
        let (a, v) = load_array_versioned(&mut r).unwrap();
        assert_eq!(
            (a.shape.as_slice(), a.dtype, v),
            (&[2, 3][..], DType::F32, RecordVersion::V1)
        );
        let (a, v) = load_array_versioned(&mut r).unwrap();
        assert_eq!(
            (a.shape.as_slice(), a.dtype, v),
            (&[3, 2][..], DType::I32, RecordVersion::Legacy)
        );
        let vals: Vec<i32> = a
            .data
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(vals, [-1, 2, 3, -4, 5, 6]);
    }
}
