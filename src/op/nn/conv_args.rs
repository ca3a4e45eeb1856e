//! The arguments `Convolution` and `Deconvolution` share, parsed as MXNet parses them.

use super::geometry::{check_layout, kernel_tuple, window_tuple, Window};
use crate::error::{Error, Result};
use crate::op::{Attrs, Params};

/// Argument names both operators take.
pub const COMMON: &[&str] = &[
    "kernel",
    "stride",
    "dilate",
    "pad",
    "num_filter",
    "num_group",
    "workspace",
    "no_bias",
    "cudnn_tune",
    "cudnn_off",
    "layout",
];

/// Parsed convolution arguments.
#[derive(Debug, Clone)]
pub struct ConvArgs {
    /// Kernel extent per spatial dimension (1 to 3 entries).
    pub kernel: Vec<usize>,
    pub stride: Vec<usize>,
    pub dilate: Vec<usize>,
    pub pad: Vec<usize>,
    pub num_filter: usize,
    pub num_group: usize,
    pub no_bias: bool,
}

impl ConvArgs {
    /// Parses the shared arguments; `extra` lists the op's own argument names.
    pub fn parse(
        op: &'static str,
        attrs: &Attrs,
        extra: &[&str],
        no_bias_default: bool,
    ) -> Result<ConvArgs> {
        let names: Vec<&str> = COMMON.iter().chain(extra).copied().collect();
        let p = Params::new(op, attrs, &names)?;
        let kernel = kernel_tuple(&p, true)?;
        let nd = kernel.len();
        let num_filter = p.int_required("num_filter")?;
        if num_filter <= 0 {
            return Err(Error::Value(format!(
                "{op}: num_filter must be positive, got {num_filter}"
            )));
        }
        let num_group = p.int("num_group", 1)?;
        if num_group <= 0 {
            return Err(Error::Value(format!(
                "{op}: num_group must be positive, got {num_group}"
            )));
        }
        if num_filter % num_group != 0 {
            return Err(Error::Value(format!(
                "{op}: num_filter ({num_filter}) must be divisible by num_group ({num_group})"
            )));
        }
        p.usize("workspace", 1024)?;
        p.bool("cudnn_off", false)?;
        p.choice(
            "cudnn_tune",
            "None",
            &["None", "fastest", "limited_workspace", "off"],
        )?;
        check_layout(&p, nd)?;
        Ok(ConvArgs {
            stride: window_tuple(&p, "stride", nd, 1, 1)?,
            dilate: window_tuple(&p, "dilate", nd, 1, 1)?,
            pad: window_tuple(&p, "pad", nd, 0, 0)?,
            kernel,
            num_filter: num_filter as usize,
            num_group: num_group as usize,
            no_bias: p.bool("no_bias", no_bias_default)?,
        })
    }

    /// Number of spatial dimensions.
    pub fn nd(&self) -> usize {
        self.kernel.len()
    }

    /// The window with the given padding (deconvolution may compute its own).
    pub fn window(&self, pad: &[usize]) -> Window {
        Window::new(&self.kernel, &self.stride, &self.dilate, pad)
    }

    /// Input names: `data`, `weight` and, unless `no_bias`, `bias`.
    pub fn input_names(&self) -> Vec<String> {
        let mut v = vec!["data".to_string(), "weight".to_string()];
        if !self.no_bias {
            v.push("bias".to_string());
        }
        v
    }

    /// Number of inputs.
    pub fn num_inputs(&self) -> usize {
        if self.no_bias {
            2
        } else {
            3
        }
    }
}
