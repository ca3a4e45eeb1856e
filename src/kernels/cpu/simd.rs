//! Running a loop compiled for the widest vector unit the CPU has (AVX-512 or AVX2 with
//! FMA on x86-64), chosen once at run time, so that the compiler's vectorised loops are not
//! held to the baseline SSE2 the crate is built for.

/// Runs `f` inlined into a copy of the caller compiled for the CPU's best instruction set.
/// `f` should be a closure marked `#[inline(always)]` holding the whole loop: only code
/// inlined into it gets the wider instructions.
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(f)
}

#[cfg(test)]
mod tests {
    use super::vectorized;

    #[test]
    fn a_vectorised_loop_computes_what_the_plain_one_does() {
        let a: Vec<f32> = (0..1001).map(|i| i as f32 * 0.37 - 50.0).collect();
        let plain: Vec<f32> = a.iter().map(|v| v.mul_add(2.0, 1.0).max(0.0)).collect();
        let wide = vectorized(
            #[inline(always)]
            || {
                a.iter()
                    .map(|v| v.mul_add(2.0, 1.0).max(0.0))
                    .collect::<Vec<f32>>()
            },
        );
        assert_eq!(plain, wide);
    }
}
