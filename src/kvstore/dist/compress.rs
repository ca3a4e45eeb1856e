//! MXNet's 2-bit gradient compression, bit for bit: each value, added to its residual,
//! becomes `+threshold` (bits `11`), `-threshold` (`10`) or 0, four values to a byte from
//! the high bits down, sixteen to a float32 slot; what was not sent stays in the
//! residual for the next push.

use crate::error::{Error, Result};

/// MXNet's compression type code for 2-bit (`kTwoBit`).
pub const TWO_BIT: i32 = 1;

const POS_BITS: [u8; 4] = [0xc0, 0x30, 0x0c, 0x03];
const NEG_BITS: [u8; 4] = [0x80, 0x20, 0x08, 0x02];

/// Bytes of the compressed form of `n` values: one float32 slot per 16 values.
pub fn compressed_bytes(n: usize) -> usize {
    n.div_ceil(16) * 4
}

/// Adds `grad` to `residual` and writes the 2-bit codes of the result into `out`
/// (`compressed_bytes(grad.len())` bytes), taking what was sent off the residual.
pub fn quantize_2bit(grad: &[f32], residual: &mut [f32], threshold: f32, out: &mut [u8]) {
    assert_eq!(grad.len(), residual.len(), "one residual per value");
    assert_eq!(out.len(), compressed_bytes(grad.len()), "compressed size");
    out.fill(0);
    let neg = -threshold;
    for (i, (g, r)) in grad.iter().zip(residual.iter_mut()).enumerate() {
        *r += g;
        if *r >= threshold {
            out[i >> 2] |= POS_BITS[i & 3];
            *r -= threshold;
        } else if *r <= neg {
            out[i >> 2] |= NEG_BITS[i & 3];
            *r -= neg;
        }
    }
}

/// The values that the 2-bit codes in `compressed` stand for, into `out`.
pub fn dequantize_2bit(compressed: &[u8], threshold: f32, out: &mut [f32]) {
    assert!(
        compressed.len() >= compressed_bytes(out.len()),
        "compressed size"
    );
    for (i, o) in out.iter_mut().enumerate() {
        let masked = compressed[i >> 2] & POS_BITS[i & 3];
        *o = if masked == POS_BITS[i & 3] {
            threshold
        } else if masked == NEG_BITS[i & 3] {
            -threshold
        } else {
            0.0
        };
    }
}

/// The body of the set-gradient-compression command, as MXNet writes it: the type code
/// and the threshold in C's `%f` (`1,0.500000`).
pub fn encode_params(threshold: f32) -> String {
    format!("{TWO_BIT},{:.6}", threshold)
}

/// The threshold in a set-gradient-compression body; only 2-bit is known.
pub fn decode_params(body: &str) -> Result<f32> {
    let bad = || Error::Value(format!("bad gradient compression parameters '{body}'"));
    let (kind, threshold) = body.split_once(',').ok_or_else(bad)?;
    if kind.trim().parse::<i32>().map_err(|_| bad())? != TWO_BIT {
        return Err(Error::Value(format!(
            "unknown gradient compression type in '{body}' (only 2bit, type {TWO_BIT})"
        )));
    }
    let t: f32 = threshold.trim().parse().map_err(|_| bad())?;
    if !t.is_finite() || t <= 0.0 {
        return Err(bad());
    }
    Ok(t)
}
