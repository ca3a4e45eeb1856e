//! Definitions of the multi-tensor helpers of LARS: `multi_sum_sq` (each array's sum of
//! squares, in float32) and `multi_lars` (each weight's learning rate scaled by its trust
//! ratio). Both are composed of element-wise operators and reductions, so they run on
//! every device.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{Defined, Src};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const SUM_SQ_PARAMS: &[Param] = &[Param::required(
    "num_arrays",
    "int",
    "number of input arrays.",
)];

const LARS_PARAMS: &[Param] = &[
    Param::required("eta", "float", "LARS eta"),
    Param::required("eps", "float", "LARS eps"),
    Param::new("rescale_grad", "float", "1", "Gradient rescaling factor"),
];

fn sum_sq(attrs: &Attrs) -> Result<OpRef> {
    let name = "multi_sum_sq";
    let p = Params::declared(name, attrs, SUM_SQ_PARAMS)?;
    let n: i64 = p.get("num_arrays")?;
    if n < 1 {
        return Err(Error::Value(format!(
            "{name}: num_arrays must be positive, got {n}"
        )));
    }
    let n = n as usize;
    Ok(Defined::op(
        name,
        Box::new(move |s: &[Shape]| {
            if s.len() != n {
                return Err(Error::Value(format!(
                    "{name}: num_arrays is {n} but {} arrays were given",
                    s.len()
                )));
            }
            Ok(vec![Shape::from_slice(&[n])])
        }),
        Box::new(move |t: &[DType]| {
            if let Some(bad) = t
                .iter()
                .find(|t| !matches!(t, DType::F16 | DType::F32 | DType::F64))
            {
                return Err(Error::Type(format!(
                    "{name}: arrays must be float16, float32 or float64, got {bad}"
                )));
            }
            Ok(vec![DType::F32])
        }),
        Box::new(move |b, shapes, types| {
            let mut sums = Vec::with_capacity(shapes.len());
            for (i, (s, &t)) in shapes.iter().zip(types).enumerate() {
                // Squared in the array's own type, as MXNet does, then summed in float32.
                let mut sq = b.unary("square", Src::Input(i))?;
                if t != DType::F32 {
                    sq = b.op("Cast", &[("dtype", "float32".into())], &[sq])?;
                }
                let flat = b.reshape(sq, &[s.iter().product::<usize>()])?;
                let total = b.reduce("sum", flat, &[0], true)?;
                sums.push(total);
            }
            if sums.len() == 1 {
                return Ok(sums);
            }
            let n = sums.len().to_string();
            Ok(vec![b.op(
                "Concat",
                &[("dim", "0".into()), ("num_args", n)],
                &sums,
            )?])
        }),
    ))
}

fn lars(attrs: &Attrs) -> Result<OpRef> {
    let name = "multi_lars";
    let p = Params::declared(name, attrs, LARS_PARAMS)?;
    // MXNet's fields are float32.
    let f32_of = |k: &str| -> Result<f64> { Ok(p.get::<f64>(k)? as f32 as f64) };
    let (eta, eps, rescale) = (f32_of("eta")?, f32_of("eps")?, f32_of("rescale_grad")?);
    Ok(Defined::op(
        name,
        Box::new(move |s: &[Shape]| {
            let names = ["lrs", "weights_sum_sq", "grads_sum_sq", "wds"];
            if s.len() != names.len() {
                return Err(Error::Value(format!(
                    "{name}: expected 4 inputs ({}), got {}",
                    names.join(", "),
                    s.len()
                )));
            }
            for (n, shape) in names.iter().zip(s) {
                if shape.len() != 1 || *shape != s[0] {
                    return Err(Error::Value(format!(
                        "{name}: {n} has shape {} but every input must be a vector of the lrs' shape {}",
                        fmt_shape(shape),
                        fmt_shape(&s[0])
                    )));
                }
            }
            Ok(vec![s[0].clone()])
        }),
        Box::new(move |t: &[DType]| {
            if let Some(bad) = t.iter().find(|&&t| t != DType::F32) {
                return Err(Error::Type(format!(
                    "{name}: every input must be float32, got {bad}"
                )));
            }
            Ok(vec![DType::F32])
        }),
        Box::new(move |b, _, _| {
            let (lrs, wss, gss, wds) = (Src::Input(0), Src::Input(1), Src::Input(2), Src::Input(3));
            let w_norm = b.unary("sqrt", wss)?;
            let g_norm = b.unary("sqrt", gss)?;
            // lr * eta * |w| / (|g| * rescale_grad + wd * |w| + eps), where both norms are
            // positive; the learning rate itself elsewhere.
            let g_part = b.scalar("_mul_scalar", g_norm, rescale)?;
            let w_part = b.binary("elemwise_mul", wds, w_norm)?;
            let denom = b.binary("elemwise_add", g_part, w_part)?;
            let denom = b.scalar("_plus_scalar", denom, eps)?;
            let num = b.scalar("_mul_scalar", lrs, eta)?;
            let num = b.binary("elemwise_mul", num, w_norm)?;
            let scaled = b.binary("elemwise_div", num, denom)?;
            let w_ok = b.scalar("_greater_scalar", w_norm, 0.0)?;
            let g_ok = b.scalar("_greater_scalar", gss, 0.0)?;
            let valid = b.binary("elemwise_mul", w_ok, g_ok)?;
            Ok(vec![b.op("where", &[], &[valid, scaled, lrs])?])
        }),
    ))
}

/// Registers `multi_sum_sq` and `multi_lars`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "multi_sum_sq",
        aliases: &[],
        inputs: &["data"],
        variadic: true,
        params: SUM_SQ_PARAMS,
        doc: "The sum of the squares of each array's elements, as a float32 vector.",
        create: Box::new(sum_sq),
    });
    r.add(OpDef {
        name: "multi_lars",
        aliases: &[],
        inputs: &["lrs", "weights_sum_sq", "grads_sum_sq", "wds"],
        variadic: false,
        params: LARS_PARAMS,
        doc: "Each weight's learning rate scaled by its LARS trust ratio.",
        create: Box::new(lars),
    });
}
