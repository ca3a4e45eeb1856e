//! Definition of `_histogram`: counts of the input's elements in equal-width bins over a
//! range, or in the bins between given edges, with the bin edges.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{check_inputs, Attrs, OpDef, OpRef, Operator, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

const PARAMS: &[Param] = &[
    Param::new(
        "bin_cnt",
        "int or None",
        "None",
        "Number of bins for uniform case",
    ),
    Param::new(
        "range",
        "None or tuple of <double>",
        "None",
        "The lower and upper range of the bins. if not provided, range is simply (a.min(), a.max()). values outside the range are ignored. the first element of the range must be less than or equal to the second.",
    ),
];

/// `_histogram`: `bins` equal-width bins over `range`, or (`None`) the bins between the
/// edges given as the second input.
pub struct Histogram {
    pub uniform: Option<(usize, f64, f64)>,
}

impl Histogram {
    /// The range the uniform bins span: an empty range is widened by half a unit each
    /// way, as MXNet does.
    pub fn span(lo: f64, hi: f64) -> (f64, f64) {
        if lo == hi {
            (lo - 0.5, hi + 0.5)
        } else {
            (lo, hi)
        }
    }

    /// The bin of `x` among `edges` (ascending; the last bin includes its right edge),
    /// or `None` when `x` is outside them or NaN. For uniform bins, `lo`/`hi` are the
    /// span and the first guess is computed from it, then moved by one against the
    /// rounded edges, as MXNet's kernel does.
    pub fn bin_of(x: f64, edges: &[f64], uniform: Option<(f64, f64)>) -> Option<usize> {
        let n = edges.len() - 1;
        match uniform {
            Some((lo, hi)) => {
                if !(x >= lo && x <= hi) {
                    return None;
                }
                let mut t = (((x - lo) * n as f64 / (hi - lo)) as i64).min(n as i64 - 1);
                if t >= 0 && x < edges[t as usize] {
                    t -= 1;
                }
                if t + 1 < n as i64 && x >= edges[(t + 1) as usize] {
                    t += 1;
                }
                (t >= 0).then_some(t as usize)
            }
            None => {
                if !(x >= edges[0] && x <= edges[n]) {
                    return None;
                }
                let above = edges.partition_point(|&e| e <= x);
                above.checked_sub(1).map(|t| t.min(n - 1))
            }
        }
    }
}

impl Operator for Histogram {
    fn name(&self) -> &'static str {
        "_histogram"
    }

    fn num_outputs(&self) -> usize {
        2
    }

    fn input_names(&self) -> Option<Vec<String>> {
        let names: &[&str] = match self.uniform {
            Some(_) => &["data"],
            None => &["data", "bins"],
        };
        Some(names.iter().map(|s| s.to_string()).collect())
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let name = self.name();
        let bins = match self.uniform {
            Some((bins, _, _)) => {
                check_inputs(name, inputs, 1)?;
                bins
            }
            None => {
                check_inputs(name, inputs, 2)?;
                let b = &inputs[1];
                if b.len() != 1 || b[0] < 2 {
                    return Err(Error::Value(format!(
                        "{name}: bins must be a 1-D array of at least 2 edges, got shape {}",
                        fmt_shape(b)
                    )));
                }
                b[0] - 1
            }
        };
        Ok(vec![
            Shape::from_slice(&[bins]),
            Shape::from_slice(&[bins + 1]),
        ])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let name = self.name();
        if inputs[0] == DType::Bool {
            return Err(Error::Type(format!(
                "{name}: data must be numeric, got bool"
            )));
        }
        if let Some(&b) = inputs.get(1) {
            if b != inputs[0] {
                return Err(Error::Type(format!(
                    "{name}: bins have dtype {b} but data has dtype {}",
                    inputs[0]
                )));
            }
        }
        Ok(vec![DType::I64, inputs[0]])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let name = "_histogram";
    let p = Params::declared(name, attrs, PARAMS)?;
    let bins: Option<i64> = p.get("bin_cnt")?;
    let range: Option<Vec<f64>> = p.get("range")?;
    let uniform = match (bins, range) {
        (None, None) => None,
        (Some(bins), Some(r)) => {
            if bins < 1 {
                return Err(Error::Value(format!(
                    "{name}: bin_cnt must be at least 1, got {bins}"
                )));
            }
            let [lo, hi] = r[..] else {
                return Err(Error::Value(format!(
                    "{name}: range must hold 2 values, got {}",
                    r.len()
                )));
            };
            if lo > hi || !lo.is_finite() || !hi.is_finite() {
                return Err(Error::Value(format!(
                    "{name}: range ({lo}, {hi}) must be finite with its first value at most its second"
                )));
            }
            Some((bins as usize, lo, hi))
        }
        _ => {
            return Err(Error::Value(format!(
                "{name}: bin_cnt and range must be given together, or neither (with bins given as an array)"
            )))
        }
    };
    Ok(Arc::new(Histogram { uniform }))
}

/// Registers `_histogram`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "_histogram",
        aliases: &["_npi_histogram"],
        inputs: &["data", "bins"],
        variadic: false,
        params: PARAMS,
        doc: "Counts of the data's elements in each bin, and the bin edges.",
        create: Box::new(create),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_include_their_left_edge_and_the_last_its_right() {
        let edges = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        let u = Some((0.0, 5.0));
        for (x, want) in [
            (0.0, Some(0)),
            (0.99, Some(0)),
            (1.0, Some(1)),
            (4.5, Some(4)),
            (5.0, Some(4)),
            (5.01, None),
            (-0.1, None),
            (f64::NAN, None),
        ] {
            assert_eq!(Histogram::bin_of(x, &edges, u), want, "{x}");
            assert_eq!(Histogram::bin_of(x, &edges, None), want, "{x}");
        }
        let uneven = [0.0, 2.1, 3.0];
        assert_eq!(Histogram::bin_of(2.0, &uneven, None), Some(0));
        assert_eq!(Histogram::bin_of(3.0, &uneven, None), Some(1));
        assert_eq!(Histogram::span(2.0, 2.0), (1.5, 2.5));
    }
}
