//! CPU kernels of the matrix products: `dot` (MXNet's N-d dot over flattened 2-D views)
//! and `batch_dot`.
//!
//! float32, float64 and float16 go through the `gemm` crate (runtime-selected SIMD
//! kernels, split over the rayon pool for large products); integer types use a plain
//! loop.

use super::num::Num;
use crate::dispatch_num;
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
pub use crate::op::linalg::MatMul;
use crate::op::linalg::{BatchDot, Dot};
use crate::op::{OpContext, OpReq};
use half::f16;
use rayon::prelude::*;
use std::any::TypeId;

/// Products with more multiply-adds than this are split across threads.
const PAR_FLOPS: usize = 1 << 18;

/// True for the element types `gemm` handles (f32, f64, f16).
pub fn gemm_type<T: 'static>() -> bool {
    [
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
        TypeId::of::<f16>(),
    ]
    .contains(&TypeId::of::<T>())
}

/// `dst (=|+=) op(a) · op(b)` for a type `gemm` handles (f32, f64, f16).
fn gemm_float<T: Num>(d: &MatMul, a: &[T], b: &[T], dst: &mut [T], add: bool, threads: bool) {
    assert!(
        dst.len() >= d.m * d.n,
        "matmul destination smaller than its shape"
    );
    // SAFETY: `dst` holds the m×n elements, rows n apart, and is borrowed mutably.
    unsafe { matmul_rows(d, a, b, dst.as_mut_ptr(), d.n, add, threads) }
}

/// `dst (=|+=) op(a) · op(b)` for a float type, into an m×n block whose rows lie `dst_rs`
/// elements apart (a block of columns of a wider matrix); `threads` lets a large product
/// use the rayon pool.
///
/// # Safety
/// `dst` addresses m rows of n writable elements, `dst_rs` apart, that nothing else reads
/// or writes during the call and that overlap neither `a` nor `b`.
pub unsafe fn matmul_rows<T: Num>(
    d: &MatMul,
    a: &[T],
    b: &[T],
    dst: *mut T,
    dst_rs: usize,
    add: bool,
    threads: bool,
) {
    assert!(
        a.len() >= d.a_len() && b.len() >= d.b_len(),
        "matmul operands smaller than their shapes"
    );
    assert!(gemm_type::<T>(), "matmul_rows on an unsupported type");
    assert!(dst_rs >= d.n, "matmul destination rows overlap");
    if d.m == 0 || d.n == 0 {
        return;
    }
    let par = if threads && d.flops() > PAR_FLOPS && rayon::current_num_threads() > 1 {
        gemm::Parallelism::Rayon(rayon::current_num_threads())
    } else {
        gemm::Parallelism::None
    };
    let (zero, one) = (T::ZERO, T::ONE);
    // SAFETY: the asserts above check that `a` and `b` hold the m×k and k×n elements the
    // strides address (the strides of `MatMul::new` stay within those extents) and that
    // `T` is one of gemm's element types; the caller vouches for `dst`. gemm computes
    // dst := alpha·dst + beta·(a·b), reading dst only when `read_dst` is set.
    unsafe {
        gemm::gemm(
            d.m,
            d.n,
            d.k,
            dst,
            1,
            dst_rs as isize,
            add,
            a.as_ptr(),
            d.a_cs as isize,
            d.a_rs as isize,
            b.as_ptr(),
            d.b_cs as isize,
            d.b_rs as isize,
            if add { one } else { zero },
            one,
            false,
            false,
            false,
            par,
        );
    }
}

/// `dst (=|+=) op(a) · op(b)` by a plain loop, for the integer types (wrapping arithmetic).
fn matmul_loop<T: Num>(d: &MatMul, a: &[T], b: &[T], dst: &mut [T], add: bool, threads: bool) {
    if d.m == 0 || d.n == 0 {
        return;
    }
    let row = |i: usize, out: &mut [T]| {
        if !add {
            out.fill(T::ZERO);
        }
        for p in 0..d.k {
            let av = a[i * d.a_rs + p * d.a_cs];
            if d.b_cs == 1 {
                let brow = &b[p * d.b_rs..p * d.b_rs + d.n];
                for (o, &bv) in out.iter_mut().zip(brow) {
                    *o = o.add(av.mul(bv));
                }
            } else {
                for (j, o) in out.iter_mut().enumerate() {
                    *o = o.add(av.mul(b[p * d.b_rs + j * d.b_cs]));
                }
            }
        }
    };
    let dst = &mut dst[..d.m * d.n];
    if threads && d.flops() > PAR_FLOPS {
        dst.par_chunks_mut(d.n)
            .enumerate()
            .for_each(|(i, o)| row(i, o));
    } else {
        dst.chunks_mut(d.n).enumerate().for_each(|(i, o)| row(i, o));
    }
}

/// One product `dst (=|+=) op(a) · op(b)` on any numeric type; `threads` lets a large
/// product use the rayon pool.
pub fn matmul<T: Num>(d: &MatMul, a: &[T], b: &[T], dst: &mut [T], add: bool, threads: bool) {
    if gemm_type::<T>() {
        gemm_float(d, a, b, dst, add, threads);
    } else {
        matmul_loop(d, a, b, dst, add, threads);
    }
}

/// `batch` products of equal shape, `a`, `b` and `dst` holding one matrix after another.
fn batched<T: Num>(d: &MatMul, batch: usize, a: &[T], b: &[T], dst: &mut [T], add: bool) {
    let (sa, sb, sd) = (d.a_len(), d.b_len(), d.m * d.n);
    if sd == 0 {
        return;
    }
    if d.k == 0 {
        if !add {
            dst.fill(T::ZERO);
        }
        return;
    }
    let one = |(i, o): (usize, &mut [T]), threads: bool| {
        matmul(
            d,
            &a[i * sa..(i + 1) * sa],
            &b[i * sb..(i + 1) * sb],
            o,
            add,
            threads,
        );
    };
    let total = d.flops().saturating_mul(batch);
    if batch > 1 && d.flops() <= PAR_FLOPS && total > PAR_FLOPS && rayon::current_num_threads() > 1
    {
        dst.par_chunks_mut(sd)
            .enumerate()
            .for_each(|p| one(p, false));
    } else {
        dst.chunks_mut(sd).enumerate().for_each(|p| one(p, true));
    }
}

/// Runs `batch` products for the kernels, honouring the request; a product written over
/// one of its own inputs goes through a scratch buffer.
pub(crate) fn run_products(
    d: &MatMul,
    batch: usize,
    lhs: &TBlob,
    rhs: &TBlob,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let add = req == OpReq::Add;
    dispatch_num!("matmul", out.dtype, T => {
        let (a, b) = (lhs.slice::<T>(), rhs.slice::<T>());
        if overlaps(out, lhs) || overlaps(out, rhs) {
            let mut tmp = vec![T::ZERO; out.size()];
            batched(d, batch, a, b, &mut tmp, false);
            out.slice_mut::<T>().copy_from_slice(&tmp);
        } else {
            batched(d, batch, a, b, out.slice_mut::<T>(), add);
        }
    });
    Ok(())
}

/// True if two blobs share any bytes.
fn overlaps(x: &TBlob, y: &TBlob) -> bool {
    let (xs, ys) = (x.ptr() as usize, y.ptr() as usize);
    let (xn, yn) = (x.size() * x.dtype.size(), y.size() * y.dtype.size());
    xn > 0 && yn > 0 && xs < ys + yn && ys < xs + xn
}

impl CpuKernel for Dot {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (d, _) = self.plan(&io.inputs[0].shape, &io.inputs[1].shape)?;
        run_products(
            &d,
            1,
            &io.inputs[0],
            &io.inputs[1],
            &io.outputs[0],
            io.req[0],
        )
    }
}

impl CpuKernel for BatchDot {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (d, batch, _) = self.plan(&io.inputs[0].shape, &io.inputs[1].shape)?;
        run_products(
            &d,
            batch,
            &io.inputs[0],
            &io.inputs[1],
            &io.outputs[0],
            io.req[0],
        )
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Dot>(k);
    cpu::add::<BatchDot>(k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::testing::iota;
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    /// Reference product of row-major matrices with explicit transposes, in f64.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        a: &[f64],
        ar: usize,
        ac: usize,
        ta: bool,
        b: &[f64],
        br: usize,
        bc: usize,
        tb: bool,
    ) -> Vec<f64> {
        let d = MatMul::new(ar, ac, ta, br, bc, tb).unwrap();
        let mut out = vec![0.0; d.m * d.n];
        for i in 0..d.m {
            for j in 0..d.n {
                for p in 0..d.k {
                    out[i * d.n + j] += a[i * d.a_rs + p * d.a_cs] * b[p * d.b_rs + j * d.b_cs];
                }
            }
        }
        out
    }

    #[test]
    fn shapes_follow_mxnet() {
        let shape = |l: &[usize], r: &[usize], ta: bool, tb: bool| {
            Dot { ta, tb }.plan(l, r).map(|(_, s)| s.to_vec())
        };
        assert_eq!(shape(&[3], &[3], false, false).unwrap(), vec![1]);
        assert!(shape(&[3], &[3], true, false).is_err());
        assert!(shape(&[3], &[4], false, false).is_err());
        assert_eq!(shape(&[2, 3], &[3], false, false).unwrap(), vec![2]);
        assert_eq!(shape(&[2], &[2, 3], false, false).unwrap(), vec![3]);
        assert_eq!(shape(&[3], &[3, 4], true, false).unwrap(), vec![4]);
        assert_eq!(shape(&[2, 3], &[3], false, true).unwrap(), vec![2]);
        assert_eq!(
            shape(&[2, 3, 4], &[4, 5, 6], false, false).unwrap(),
            vec![2, 3, 5, 6]
        );
        assert_eq!(
            shape(&[4, 3, 2], &[4, 5, 6], true, false).unwrap(),
            vec![3, 2, 5, 6]
        );
        assert_eq!(
            shape(&[2, 3, 4], &[5, 6, 4], false, true).unwrap(),
            vec![2, 3, 5, 6]
        );
        assert_eq!(
            shape(&[2, 6, 2], &[2, 5], true, false).unwrap(),
            vec![6, 2, 5]
        );
        assert!(shape(&[2, 3, 4], &[5, 2, 2], false, true).is_err());
        let e = shape(&[2, 3], &[4, 5], false, false)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("dot: shape mismatch: (2, 3) X (4, 5)"), "{e}");
        let b = |l: &[usize], r: &[usize], ta: bool, tb: bool| {
            BatchDot { ta, tb }.plan(l, r).map(|(_, _, s)| s.to_vec())
        };
        assert_eq!(
            b(&[2, 4, 3], &[2, 5, 4], true, true).unwrap(),
            vec![2, 3, 5]
        );
        assert_eq!(
            b(&[2, 2, 3, 4], &[2, 2, 4, 5], false, false).unwrap(),
            vec![2, 2, 3, 5]
        );
        assert!(b(&[2, 3, 4], &[3, 4, 5], false, false).is_err());
        assert!(b(&[2, 3, 4], &[2, 3, 5], false, false).is_err());
        assert!(b(&[3, 4], &[4, 5], false, false).is_err());
    }

    #[test]
    fn dot_values_with_transposes() {
        let r = &run("dot", &[], &[iota(&[2, 3]), iota(&[3, 4])])[0];
        assert_eq!(r.shape(), &[2, 4]);
        assert_eq!(f32s(r), vec![20., 23., 26., 29., 56., 68., 80., 92.]);
        let r = &run(
            "dot",
            &[("transpose_a", "True")],
            &[iota(&[3, 2]), iota(&[3, 4])],
        )[0];
        assert_eq!(&f32s(r)[..6], &[40., 46., 52., 58., 52., 61.]);
        let r = &run(
            "dot",
            &[("transpose_b", "True")],
            &[iota(&[2, 3]), iota(&[4, 3])],
        )[0];
        assert_eq!(&f32s(r)[..6], &[5., 14., 23., 32., 14., 50.]);
        let attrs = [
            ("transpose_a", "1"),
            ("transpose_b", "1"),
            ("forward_stype", "default"),
        ];
        let r = &run("dot", &attrs, &[iota(&[3, 2]), iota(&[4, 3])])[0];
        assert_eq!(&f32s(r)[..6], &[10., 28., 46., 64., 13., 40.]);
        let r = &run("dot", &[], &[iota(&[3]), iota(&[3])])[0];
        assert_eq!((r.shape(), f32s(r)), (&[1usize][..], vec![5.]));
        let r = &run(
            "dot",
            &[("transpose_a", "True")],
            &[iota(&[4, 3, 2]), iota(&[4, 5, 6])],
        )[0];
        assert_eq!(r.shape(), &[3, 2, 5, 6]);
        assert_eq!(&f32s(r)[..3], &[2520., 2556., 2592.]);
        let r = &run(
            "dot",
            &[("transpose_b", "True")],
            &[iota(&[2, 3, 4]), iota(&[5, 6, 4])],
        )[0];
        assert_eq!(&f32s(r)[..3], &[14., 38., 62.]);
        assert!(try_run("dot", &[], &[iota(&[2, 3]), iota(&[4, 5])]).is_err());
        assert!(try_run(
            "dot",
            &[("transpose_c", "1")],
            &[iota(&[2, 3]), iota(&[3, 5])]
        )
        .is_err());
        let f64s = array::<f64>(&[1, 2], &[1., 2.]);
        assert!(try_run("dot", &[], &[f64s, iota(&[2, 1])]).is_err());
    }

    #[test]
    fn dot_other_dtypes() {
        let a = array::<i32>(&[2, 2], &[1, 2, 3, 4]);
        let b = array::<i32>(&[2, 2], &[5, 6, 7, 8]);
        assert_eq!(
            values::<i32>(&run("dot", &[], &[a.clone(), b.clone()])[0]),
            vec![19, 22, 43, 50]
        );
        let attrs = [("transpose_a", "1"), ("transpose_b", "1")];
        assert_eq!(
            values::<i32>(&run("dot", &attrs, &[a, b])[0]),
            vec![23, 31, 34, 46]
        );
        let a = array::<f64>(&[1, 2], &[1., 2.]);
        let b = array::<f64>(&[2, 1], &[3., 4.]);
        assert_eq!(values::<f64>(&run("dot", &[], &[a, b])[0]), vec![11.]);
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let a = array::<f16>(&[2, 2], &h(&[1., 2., 3., 4.]));
        let b = array::<f16>(&[2, 2], &h(&[5., 6., 7., 8.]));
        assert_eq!(
            values::<f16>(&run("dot", &[], &[a, b])[0]),
            h(&[19., 22., 43., 50.])
        );
    }

    #[test]
    fn batch_dot_values() {
        let r = &run("batch_dot", &[], &[iota(&[2, 3, 4]), iota(&[2, 4, 5])])[0];
        assert_eq!(r.shape(), &[2, 3, 5]);
        assert_eq!(&f32s(r)[..6], &[70., 76., 82., 88., 94., 190.]);
        let attrs = [("transpose_a", "1"), ("transpose_b", "1")];
        let r = &run("batch_dot", &attrs, &[iota(&[2, 4, 3]), iota(&[2, 5, 4])])[0];
        assert_eq!(&f32s(r)[..6], &[42., 114., 186., 258., 330., 48.]);
        let v = f32s(r);
        assert_eq!(v[15], {
            // batch 1, row 0, column 0: sum_p A[1][p][0] * B[1][0][p]
            (0..4)
                .map(|p| (12 + p * 3) as f32 * (20 + p) as f32)
                .sum::<f32>()
        });
        assert!(try_run("batch_dot", &[], &[iota(&[3, 4]), iota(&[4, 5])]).is_err());
    }

    #[test]
    fn products_match_naive_for_all_transposes() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (5, 7, 3),
            (33, 65, 17),
            (64, 128, 96),
            (1, 300, 1),
        ] {
            for ta in [false, true] {
                for tb in [false, true] {
                    let (ar, ac) = if ta { (k, m) } else { (m, k) };
                    let (br, bc) = if tb { (n, k) } else { (k, n) };
                    let a: Vec<f64> = (0..m * k).map(|i| ((i * 37) % 11) as f64 - 5.0).collect();
                    let b: Vec<f64> = (0..k * n).map(|i| ((i * 53) % 13) as f64 - 6.0).collect();
                    let want = naive(&a, ar, ac, ta, &b, br, bc, tb);
                    let attrs = [
                        ("transpose_a", if ta { "1" } else { "0" }),
                        ("transpose_b", if tb { "1" } else { "0" }),
                    ];
                    let got = values::<f64>(
                        &run(
                            "dot",
                            &attrs,
                            &[array::<f64>(&[ar, ac], &a), array::<f64>(&[br, bc], &b)],
                        )[0],
                    );
                    assert_eq!(got, want, "f64 {m}x{k}x{n} ta={ta} tb={tb}");
                    let ai: Vec<i64> = a.iter().map(|&v| v as i64).collect();
                    let bi: Vec<i64> = b.iter().map(|&v| v as i64).collect();
                    let got = values::<i64>(
                        &run(
                            "dot",
                            &attrs,
                            &[array::<i64>(&[ar, ac], &ai), array::<i64>(&[br, bc], &bi)],
                        )[0],
                    );
                    assert_eq!(
                        got,
                        want.iter().map(|&v| v as i64).collect::<Vec<_>>(),
                        "i64 {m}x{k}x{n}"
                    );
                    let bd = values::<f64>(
                        &run(
                            "batch_dot",
                            &attrs,
                            &[
                                array::<f64>(&[1, ar, ac], &a),
                                array::<f64>(&[1, br, bc], &b),
                            ],
                        )[0],
                    );
                    assert_eq!(bd, want, "batch_dot {m}x{k}x{n} ta={ta} tb={tb}");
                }
            }
        }
    }

    #[test]
    fn large_products_are_split_and_accumulate() {
        let (m, k, n) = (150, 200, 170);
        let a: Vec<f64> = (0..m * k).map(|i| ((i * 37) % 11) as f64 - 5.0).collect();
        let b: Vec<f64> = (0..k * n).map(|i| ((i * 53) % 13) as f64 - 6.0).collect();
        let want = naive(&a, m, k, false, &b, k, n, false);
        let got = values::<f64>(
            &run(
                "dot",
                &[],
                &[array::<f64>(&[m, k], &a), array::<f64>(&[k, n], &b)],
            )[0],
        );
        assert_eq!(got, want);
        // Many small products: split over the batch.
        let batch = 64;
        let a3: Vec<f32> = (0..batch * 16 * 32).map(|i| (i % 7) as f32).collect();
        let b3: Vec<f32> = (0..batch * 32 * 8).map(|i| (i % 5) as f32).collect();
        let got = f32s(
            &run(
                "batch_dot",
                &[],
                &[f32a(&[batch, 16, 32], &a3), f32a(&[batch, 32, 8], &b3)],
            )[0],
        );
        for bi in [0, 17, 63] {
            let a64: Vec<f64> = a3[bi * 512..(bi + 1) * 512]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let b64: Vec<f64> = b3[bi * 256..(bi + 1) * 256]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let want = naive(&a64, 16, 32, false, &b64, 32, 8, false);
            let got: Vec<f64> = got[bi * 128..(bi + 1) * 128]
                .iter()
                .map(|&v| v as f64)
                .collect();
            assert_eq!(got, want);
        }
        // Add request: dst += a·b.
        let d = MatMul::new(2, 2, false, 2, 2, false).unwrap();
        let mut dst = vec![1f32; 4];
        matmul(
            &d,
            &[1., 2., 3., 4.],
            &[5., 6., 7., 8.],
            &mut dst,
            true,
            false,
        );
        assert_eq!(dst, vec![20., 23., 44., 51.]);
        let mut dst = vec![1i32; 4];
        matmul(&d, &[1, 2, 3, 4], &[5, 6, 7, 8], &mut dst, true, false);
        assert_eq!(dst, vec![20, 23, 44, 51]);
    }

    #[test]
    fn empty_inner_dimension_gives_zeros() {
        let a = f32a(&[2, 0], &[]);
        let b = f32a(&[0, 3], &[]);
        let r = &run("dot", &[], &[a, b])[0];
        assert_eq!(r.shape(), &[2, 3]);
        assert_eq!(f32s(r), vec![0.; 6]);
    }

    /// 1024×1024 float32 product throughput; run with
    /// `cargo test --release --lib linalg::tests::dot_gflops -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn dot_gflops() {
        let n = 1024;
        let a: Vec<f32> = (0..n * n).map(|i| (i % 17) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..n * n).map(|i| (i % 13) as f32 * 0.1).collect();
        let d = MatMul::new(n, n, false, n, n, false).unwrap();
        let mut c = vec![0f32; n * n];
        matmul(&d, &a, &b, &mut c, false, true);
        let mut best = f64::INFINITY;
        for _ in 0..30 {
            let t = std::time::Instant::now();
            matmul(&d, &a, &b, &mut c, false, true);
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "dot 1024x1024 f32: best {:.2} ms, {:.1} GFLOP/s",
            best * 1e3,
            2.0 * (n * n * n) as f64 / best / 1e9
        );
    }
}
