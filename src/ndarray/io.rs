//! Saving arrays to and loading them from MXNet's binary files.

use super::serialize::{load_list, save_list, SavedArray};
use super::NDArray;
use crate::context::{Context, DeviceType};
use crate::error::{Error, Result};

/// Writes `arrays` (with `names`, or none for a list) to `path` in MXNet's format.
pub fn save(path: &str, arrays: &[NDArray], names: &[String]) -> Result<()> {
    let saved = arrays
        .iter()
        .map(|a| SavedArray::new(a.shape().to_vec(), a.context(), a.dtype(), a.to_bytes()?))
        .collect::<Result<Vec<_>>>()?;
    let bytes = save_list(&saved, names)?;
    std::fs::write(path, bytes).map_err(|e| Error::Value(format!("cannot write '{path}': {e}")))
}

/// What a file held: its arrays (on cpu(0)), their names, and for each array the GPU it
/// was saved from (`None` for a CPU context), so the caller can put it back there.
pub type Loaded = (Vec<NDArray>, Vec<String>, Vec<Option<i32>>);

/// Reads the arrays and names from a file MXNet or rsmx wrote; arrays land on cpu(0).
pub fn load(path: &str) -> Result<Loaded> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::Value(format!("cannot read '{path}': {e}")))?;
    load_bytes(&bytes).map_err(|e| e.with_prefix(&format!("cannot load '{path}': ")))
}

/// Reads arrays and names from the bytes of a file.
pub fn load_bytes(bytes: &[u8]) -> Result<Loaded> {
    let (saved, names) = load_list(bytes)?;
    let gpus = saved
        .iter()
        .map(|s| (s.ctx.dev_type == DeviceType::Gpu).then_some(s.ctx.dev_id))
        .collect();
    let arrays = saved
        .into_iter()
        .map(|s| {
            let a = NDArray::empty(&s.shape, s.dtype, Context::cpu(0))?;
            a.write_bytes(s.data)?;
            Ok(a)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((arrays, names, gpus))
}
