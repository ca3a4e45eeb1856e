//! The float32 LSTM, GRU and tanh cell steps of `cell`, eight units at a time with AVX2
//! and FMA. Each computes the leading multiple of eight units of a row and returns how
//! many; the scalar loops finish the row.

#![cfg(target_arch = "x86_64")]

use super::cell::{Clip, GruBwdRow, GruFwdRow, LstmBwdRow, LstmFwdRow};
use crate::kernels::cpu::vmath::{load, sigmoid8, store, tanh8};
use std::arch::x86_64::*;

/// `clip.apply` per lane: clamped to the range, NaN kept or turned into the lower bound.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn clip8(cl: Clip<f32>, c: __m256) -> __m256 {
    let lo = _mm256_set1_ps(cl.lo);
    // `max`/`min` return their second operand for a NaN lane: NaN passes through.
    let clamped = _mm256_min_ps(_mm256_set1_ps(cl.hi), _mm256_max_ps(lo, c));
    if cl.nan_to_lo {
        _mm256_blendv_ps(clamped, lo, _mm256_cmp_ps::<_CMP_UNORD_Q>(c, c))
    } else {
        clamped
    }
}

/// All lanes set where `clip.passes` holds, clear elsewhere (NaN fails).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn passes8(cl: Clip<f32>, c: __m256) -> __m256 {
    _mm256_and_ps(
        _mm256_cmp_ps::<_CMP_GE_OQ>(c, _mm256_set1_ps(cl.lo)),
        _mm256_cmp_ps::<_CMP_LE_OQ>(c, _mm256_set1_ps(cl.hi)),
    )
}

/// The leading units of one LSTM forward row, as `cell::lstm_forward_units`.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn lstm_forward(
    h: usize,
    r: &mut LstmFwdRow<f32>,
    clip: Option<Clip<f32>>,
) -> usize {
    assert!(r.g.len() >= 4 * h && r.q.len() >= 4 * h);
    assert!(r.cp.len() >= h && r.c.len() >= h && r.out.len() >= h);
    let end = h / 8 * 8;
    for j in (0..end).step_by(8) {
        // SAFETY (every load and store): `j + 8 <= h` and the lengths asserted above.
        unsafe {
            let i = sigmoid8(_mm256_add_ps(load(r.g, j), load(r.q, j)));
            let f = sigmoid8(_mm256_add_ps(load(r.g, h + j), load(r.q, h + j)));
            let cand = tanh8(_mm256_add_ps(load(r.g, 2 * h + j), load(r.q, 2 * h + j)));
            let o = sigmoid8(_mm256_add_ps(load(r.g, 3 * h + j), load(r.q, 3 * h + j)));
            let mut c = _mm256_fmadd_ps(f, load(r.cp, j), _mm256_mul_ps(i, cand));
            if let Some(cl) = clip {
                c = clip8(cl, c);
            }
            store(r.g, j, i);
            store(r.g, h + j, f);
            store(r.g, 2 * h + j, cand);
            store(r.g, 3 * h + j, o);
            store(r.c, j, c);
            store(r.out, j, _mm256_mul_ps(o, tanh8(c)));
        }
    }
    end
}

/// The leading units of one GRU forward row, as `cell::gru_forward_units`.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn gru_forward(h: usize, r: &mut GruFwdRow<f32>) -> usize {
    assert!(r.g.len() >= 3 * h && r.q.len() >= 3 * h && r.bn.len() >= h);
    assert!(r.hn.len() >= h && r.hp.len() >= h && r.out.len() >= h);
    let end = h / 8 * 8;
    let one = _mm256_set1_ps(1.0);
    for j in (0..end).step_by(8) {
        // SAFETY (every load and store): `j + 8 <= h` and the lengths asserted above.
        unsafe {
            let rg = sigmoid8(_mm256_add_ps(load(r.g, j), load(r.q, j)));
            let z = sigmoid8(_mm256_add_ps(load(r.g, h + j), load(r.q, h + j)));
            let hn = _mm256_add_ps(load(r.q, 2 * h + j), load(r.bn, j));
            let cand = tanh8(_mm256_fmadd_ps(rg, hn, load(r.g, 2 * h + j)));
            store(r.g, j, rg);
            store(r.g, h + j, z);
            store(r.g, 2 * h + j, cand);
            store(r.hn, j, hn);
            let keep = _mm256_mul_ps(z, load(r.hp, j));
            store(r.out, j, _mm256_fmadd_ps(_mm256_sub_ps(one, z), cand, keep));
        }
    }
    end
}

/// The leading units of a vanilla tanh cell's row: `g = tanh(g + q)`, copied to `out`.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tanh_forward(g: &mut [f32], q: &[f32], out: &mut [f32]) -> usize {
    let h = g.len().min(q.len()).min(out.len());
    let end = h / 8 * 8;
    for j in (0..end).step_by(8) {
        // SAFETY: `j + 8 <= h`, the shortest of the three.
        unsafe {
            let a = tanh8(_mm256_add_ps(load(g, j), load(q, j)));
            store(g, j, a);
            store(out, j, a);
        }
    }
    end
}

/// The leading units of one LSTM backward row, as `cell::lstm_backward_units`.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn lstm_backward(
    h: usize,
    r: &mut LstmBwdRow<f32>,
    clip: Option<Clip<f32>>,
) -> usize {
    assert!(r.g.len() >= 4 * h && r.d.len() >= 4 * h);
    assert!(r.c.len() >= h && r.cp.len() >= h && r.dh.len() >= h && r.dc.len() >= h);
    let end = h / 8 * 8;
    let one = _mm256_set1_ps(1.0);
    for j in (0..end).step_by(8) {
        // SAFETY (every load and store): `j + 8 <= h` and the lengths asserted above.
        unsafe {
            let (i, f) = (load(r.g, j), load(r.g, h + j));
            let (cand, o) = (load(r.g, 2 * h + j), load(r.g, 3 * h + j));
            let (cp, dh) = (load(r.cp, j), load(r.dh, j));
            let tc = tanh8(load(r.c, j));
            let dtc = _mm256_fnmadd_ps(tc, tc, one);
            let mut dc = _mm256_fmadd_ps(_mm256_mul_ps(dh, o), dtc, load(r.dc, j));
            if let Some(cl) = clip {
                let c = _mm256_fmadd_ps(f, cp, _mm256_mul_ps(i, cand));
                dc = _mm256_and_ps(dc, passes8(cl, c));
            }
            let di = _mm256_mul_ps(
                _mm256_mul_ps(dc, cand),
                _mm256_mul_ps(i, _mm256_sub_ps(one, i)),
            );
            let df = _mm256_mul_ps(
                _mm256_mul_ps(dc, cp),
                _mm256_mul_ps(f, _mm256_sub_ps(one, f)),
            );
            let dg = _mm256_mul_ps(_mm256_mul_ps(dc, i), _mm256_fnmadd_ps(cand, cand, one));
            let dout = _mm256_mul_ps(
                _mm256_mul_ps(dh, tc),
                _mm256_mul_ps(o, _mm256_sub_ps(one, o)),
            );
            store(r.d, j, di);
            store(r.d, h + j, df);
            store(r.d, 2 * h + j, dg);
            store(r.d, 3 * h + j, dout);
            store(r.dc, j, _mm256_mul_ps(dc, f));
        }
    }
    end
}

/// The leading units of one GRU backward row, as `cell::gru_backward_units`.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn gru_backward(h: usize, r: &mut GruBwdRow<f32>) -> usize {
    assert!(r.g.len() >= 3 * h && r.d.len() >= 3 * h && r.dq.len() >= 3 * h);
    assert!(r.hn.len() >= h && r.hp.len() >= h && r.dh.len() >= h && r.direct.len() >= h);
    let end = h / 8 * 8;
    let one = _mm256_set1_ps(1.0);
    for j in (0..end).step_by(8) {
        // SAFETY (every load and store): `j + 8 <= h` and the lengths asserted above.
        unsafe {
            let (rg, z, cand) = (load(r.g, j), load(r.g, h + j), load(r.g, 2 * h + j));
            let dh = load(r.dh, j);
            let dn = _mm256_mul_ps(
                _mm256_mul_ps(dh, _mm256_sub_ps(one, z)),
                _mm256_fnmadd_ps(cand, cand, one),
            );
            let dr = _mm256_mul_ps(
                _mm256_mul_ps(dn, load(r.hn, j)),
                _mm256_mul_ps(rg, _mm256_sub_ps(one, rg)),
            );
            let dz = _mm256_mul_ps(
                _mm256_mul_ps(dh, _mm256_sub_ps(load(r.hp, j), cand)),
                _mm256_mul_ps(z, _mm256_sub_ps(one, z)),
            );
            store(r.d, j, dr);
            store(r.d, h + j, dz);
            store(r.d, 2 * h + j, dn);
            store(r.dq, j, dr);
            store(r.dq, h + j, dz);
            store(r.dq, 2 * h + j, _mm256_mul_ps(dn, rg));
            store(r.direct, j, _mm256_mul_ps(dh, z));
        }
    }
    end
}
