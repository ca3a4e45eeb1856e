//! The arguments `Convolution` and `Deconvolution` share, parsed as MXNet parses them.

use super::geometry::{check_layout, kernel_tuple, window_tuple, Window};
use crate::error::{Error, Result};
use crate::op::Params;

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
    /// Parses the arguments both operators take from `p`, which declares them.
    pub fn parse(p: &Params) -> Result<ConvArgs> {
        let op = p.op();
        let kernel = kernel_tuple(p, true)?;
        let nd = kernel.len();
        let num_filter: i64 = p.get("num_filter")?;
        if num_filter <= 0 {
            return Err(Error::Value(format!(
                "{op}: num_filter must be positive, got {num_filter}"
            )));
        }
        let num_group: i64 = p.get("num_group")?;
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
        p.get::<usize>("workspace")?;
        p.get::<bool>("cudnn_off")?;
        p.get_choice(
            "cudnn_tune",
            &["None", "fastest", "limited_workspace", "off"],
        )?;
        check_layout(p, nd)?;
        Ok(ConvArgs {
            stride: window_tuple(p, "stride", nd, 1, 1)?,
            dilate: window_tuple(p, "dilate", nd, 1, 1)?,
            pad: window_tuple(p, "pad", nd, 0, 0)?,
            kernel,
            num_filter: num_filter as usize,
            num_group: num_group as usize,
            no_bias: p.get("no_bias")?,
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
