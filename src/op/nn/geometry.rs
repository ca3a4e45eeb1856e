//! Window arithmetic shared by the convolution, deconvolution and pooling definitions:
//! parsing of `kernel`/`stride`/`dilate`/`pad` tuples, output sizes and the column
//! matrix an image unfolds into.
//!
//! Spatial extents are kept as three entries (depth, height, width); 1-D and 2-D windows
//! get leading entries of size 1 (kernel 1, stride 1, dilation 1, no padding), so one
//! kernel serves every dimensionality.

use crate::error::{Error, Result};
use crate::op::Params;
use crate::shape::fmt_shape;

/// Three spatial extents, outermost first.
pub type Dims3 = [usize; 3];

/// Pads a 1- to 3-entry tuple to three entries with `fill` in front.
pub fn to3(v: &[usize], fill: usize) -> Dims3 {
    let mut out = [fill; 3];
    out[3 - v.len()..].copy_from_slice(v);
    out
}

/// A window tuple argument (`stride`, `dilate`, `pad`, `adj`): the default when absent or
/// empty, else exactly one entry per kernel dimension, each at least `min`.
pub fn window_tuple(
    p: &Params,
    key: &str,
    nd: usize,
    default: usize,
    min: usize,
) -> Result<Vec<usize>> {
    let op = p.op();
    let v = p.get::<Option<Vec<i64>>>(key)?.unwrap_or_default();
    if v.is_empty() {
        return Ok(vec![default; nd]);
    }
    if v.len() != nd {
        return Err(Error::Value(format!(
            "{op}: {key} {} must have one entry per kernel dimension ({nd})",
            p.raw(key).unwrap_or("")
        )));
    }
    v.iter()
        .map(|&x| {
            if x < min as i64 {
                Err(Error::Value(format!(
                    "{op}: {key} entries must be at least {min}, got {}",
                    p.raw(key).unwrap_or("")
                )))
            } else {
                Ok(x as usize)
            }
        })
        .collect()
}

/// The `kernel` tuple: 1 to 3 positive entries.
pub fn kernel_tuple(p: &Params, required: bool) -> Result<Vec<usize>> {
    let op = p.op();
    let v = if required {
        p.get::<Vec<i64>>("kernel")?
    } else {
        p.get::<Option<Vec<i64>>>("kernel")?.unwrap_or_default()
    };
    if v.is_empty() && !required {
        return Ok(Vec::new());
    }
    if v.is_empty() || v.len() > 3 {
        return Err(Error::Value(format!(
            "{op}: kernel must have 1, 2 or 3 entries, got {}",
            p.raw("kernel").unwrap_or("")
        )));
    }
    if v.iter().any(|&x| x <= 0) {
        return Err(Error::Value(format!(
            "{op}: kernel entries must be positive, got {}",
            p.raw("kernel").unwrap_or("")
        )));
    }
    Ok(v.iter().map(|&x| x as usize).collect())
}

/// The data layout argument: only the channels-first layouts run on the CPU.
pub fn check_layout(p: &Params, nd: usize) -> Result<()> {
    let layout = p.get_choice(
        "layout",
        &["None", "NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC"],
    )?;
    let want = ["NCW", "NCHW", "NCDHW"][nd.clamp(1, 3) - 1];
    if layout != "None" && layout != want {
        return Err(Error::Value(format!(
            "{}: layout {layout} is not supported on the CPU for a {nd}-D window; use {want}",
            p.op()
        )));
    }
    Ok(())
}

/// A sliding window over three spatial dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub kernel: Dims3,
    pub stride: Dims3,
    pub dilate: Dims3,
    pub pad: Dims3,
}

impl Window {
    /// A window from per-dimension tuples of equal length (1 to 3).
    pub fn new(kernel: &[usize], stride: &[usize], dilate: &[usize], pad: &[usize]) -> Window {
        Window {
            kernel: to3(kernel, 1),
            stride: to3(stride, 1),
            dilate: to3(dilate, 1),
            pad: to3(pad, 0),
        }
    }

    /// Extent of the dilated kernel along dimension `i`.
    pub fn span(&self, i: usize) -> usize {
        self.dilate[i] * (self.kernel[i] - 1) + 1
    }

    /// Number of kernel taps.
    pub fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// True when the window reads its input unchanged (1×1 kernel, unit stride, no pad).
    pub fn is_identity(&self) -> bool {
        self.kernel == [1; 3] && self.stride == [1; 3] && self.pad == [0; 3]
    }
}

/// Product of three extents.
pub fn volume(d: &Dims3) -> usize {
    d[0] * d[1] * d[2]
}

/// Checks that `data` has `nd` spatial dimensions after batch and channel.
pub fn check_data_ndim(op: &str, data: &[usize], nd: usize) -> Result<()> {
    if data.len() != nd + 2 {
        let layout = ["NCW", "NCHW", "NCDHW"][nd.clamp(1, 3) - 1];
        return Err(Error::Value(format!(
            "{op}: data must be {}-D ({layout}) for a {nd}-D kernel, got shape {}",
            nd + 2,
            fmt_shape(data)
        )));
    }
    Ok(())
}

/// The shapes of one unfolding: `channels` planes of extent `input`, a window, and the
/// grid of window positions `output`.
#[derive(Debug, Clone, Copy)]
pub struct ColGeom {
    pub channels: usize,
    pub input: Dims3,
    pub output: Dims3,
    pub win: Window,
}

impl ColGeom {
    /// Rows of the column matrix (channels × kernel taps).
    pub fn rows(&self) -> usize {
        self.channels * self.win.taps()
    }

    /// Columns of the column matrix (output positions).
    pub fn cols(&self) -> usize {
        volume(&self.output)
    }

    /// Elements of one image.
    pub fn image_len(&self) -> usize {
        self.channels * volume(&self.input)
    }
}
