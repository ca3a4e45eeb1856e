//! Splitting a batch over the rayon pool: per-sample tasks for forward passes, lent one
//! share of the scratch memory per thread, and a few contiguous chunks with their own
//! scratch and partial sums for backward passes; and the outputs they write.

use crate::kernels::cpu::num::Num;
use crate::ndarray::TBlob;
use crate::op::OpReq;
use parking_lot::Mutex;
use rayon::prelude::*;
use std::ops::Range;

/// Below this many multiply-adds a batch runs on the calling thread.
const PAR_WORK: usize = 1 << 15;

/// True if a batch of `batch` samples and `work` multiply-adds is worth splitting.
fn split(batch: usize, work: usize) -> bool {
    batch > 1 && work > PAR_WORK && rayon::current_num_threads() > 1
}

/// How many runs of samples a batch of `batch` samples and `work` multiply-adds is cut
/// into: one per thread when it is worth splitting, else one. Scratch memory is sized
/// per run.
pub fn tasks(batch: usize, work: usize) -> usize {
    if split(batch, work) {
        batch.min(rayon::current_num_threads())
    } else {
        1
    }
}

/// `s` cut into `n` equal parts (empty ones if `s` is).
fn shares<T>(s: &mut [T], n: usize) -> Vec<&mut [T]> {
    let per = s.len() / n.max(1);
    let mut rest = s;
    (0..n)
        .map(|_| {
            let (a, b) = std::mem::take(&mut rest).split_at_mut(per);
            rest = b;
            a
        })
        .collect()
}

/// Runs `one(n, out_n, scratch, threads)` for every sample, `out_n` being sample `n`'s
/// `out_len` elements of `out`. When the batch is worth splitting the samples are tasks
/// of the rayon pool and `scratch` is cut into `tasks(batch, work)` equal shares, one
/// per thread, each lent to one task at a time; otherwise the samples go in turn with
/// all of `scratch` and `threads` lets each product use the pool.
pub fn for_batch<T: Num>(
    batch: usize,
    work: usize,
    out: &mut [T],
    out_len: usize,
    scratch: &mut [T],
    one: impl Fn(usize, &mut [T], &mut [T], bool) + Sync + Send,
) {
    if out_len == 0 {
        return;
    }
    let n = tasks(batch, work);
    let mut parts = shares(scratch, n);
    if n == 1 {
        let s = &mut *parts[0];
        out.chunks_mut(out_len)
            .enumerate()
            .for_each(|(i, o)| one(i, o, s, true));
        return;
    }
    let per_task = parts[0].len();
    let slots: Vec<Mutex<&mut [T]>> = parts.into_iter().map(Mutex::new).collect();
    out.par_chunks_mut(out_len).enumerate().for_each(|(i, o)| {
        // Each pool thread starts at its own share, so the shares are not contended.
        let first = rayon::current_thread_index().unwrap_or(0);
        for k in 0..n {
            if let Some(mut s) = slots[(first + k) % n].try_lock() {
                one(i, o, &mut s, false);
                return;
            }
        }
        one(i, o, &mut vec![T::ZERO; per_task], false);
    });
}

/// How many runs `units` independent pieces of `work` multiply-adds in all are shared
/// between: one per thread when every thread gets at least two (so that uneven pieces
/// still balance), else one, whose products then use the pool themselves.
pub fn unit_runs(units: usize, work: usize) -> usize {
    let threads = rayon::current_num_threads();
    if threads > 1 && units >= 2 * threads && work > PAR_WORK {
        threads
    } else {
        1
    }
}

/// Runs `one(unit, scratch, threads)` for every unit in `0..units`. With `runs > 1` the
/// units are tasks of the rayon pool and `scratch` is cut into `runs` equal shares, each
/// lent to one task at a time; otherwise the units go in turn with all of `scratch` and
/// `threads` set, letting each product use the pool.
pub fn for_units<T: Num>(
    units: usize,
    runs: usize,
    scratch: &mut [T],
    one: impl Fn(usize, &mut [T], bool) + Sync + Send,
) {
    if runs <= 1 {
        (0..units).for_each(|u| one(u, scratch, true));
        return;
    }
    let parts = shares(scratch, runs);
    let per_task = parts[0].len();
    let slots: Vec<Mutex<&mut [T]>> = parts.into_iter().map(Mutex::new).collect();
    (0..units).into_par_iter().for_each(|u| {
        let first = rayon::current_thread_index().unwrap_or(0);
        for k in 0..runs {
            if let Some(mut s) = slots[(first + k) % runs].try_lock() {
                one(u, &mut s, false);
                return;
            }
        }
        one(u, &mut vec![T::ZERO; per_task], false);
    });
}

/// A batch cut into `tasks(batch, work)` contiguous chunks, each with its slice of an
/// optional per-sample output and its share of the scratch memory.
pub struct Chunked<'a, T> {
    parts: Vec<Part<'a, T>>,
}

/// One chunk: its samples, its slice of the output and its scratch.
type Part<'a, T> = (Range<usize>, Option<&'a mut [T]>, &'a mut [T]);

impl<'a, T: Num> Chunked<'a, T> {
    /// Splits `batch` samples (and `out`, `per_sample` elements each, and `scratch`) into
    /// chunks.
    pub fn new(
        batch: usize,
        work: usize,
        out: Option<&'a mut [T]>,
        per_sample: usize,
        scratch: &'a mut [T],
    ) -> Self {
        let n = tasks(batch, work);
        let mut parts = Vec::with_capacity(n);
        let mut rest = out;
        let mut start = 0;
        for (i, s) in shares(scratch, n).into_iter().enumerate() {
            let end = batch * (i + 1) / n;
            let mine = rest.take().map(|s| {
                let (a, b) = s.split_at_mut((end - start) * per_sample);
                rest = Some(b);
                a
            });
            parts.push((start..end, mine, s));
            start = end;
        }
        Chunked { parts }
    }

    /// Runs `f(samples, out_chunk, scratch)` on every chunk, in parallel when there are
    /// several, and returns the results in order. `samples` covers the whole batch when
    /// there is one chunk, which lets `f` parallelise inside.
    pub fn run<R: Send>(
        self,
        f: impl Fn(Range<usize>, Option<&mut [T]>, &mut [T]) -> R + Sync + Send,
    ) -> Vec<R> {
        if self.parts.len() == 1 {
            self.parts.into_iter().map(|(r, o, s)| f(r, o, s)).collect()
        } else {
            self.parts
                .into_par_iter()
                .map(|(r, o, s)| f(r, o, s))
                .collect()
        }
    }
}

/// An output a kernel may write: absent (`Null` request), overwritten, or added to.
pub struct Sink<'a, T> {
    slice: Option<&'a mut [T]>,
    add: bool,
}

impl<'a, T: Num> Sink<'a, T> {
    /// The output of `blob` under `req`; absent if either is missing or `req` is `Null`.
    pub fn new(blob: Option<&'a TBlob>, req: Option<OpReq>) -> Self {
        match (blob, req) {
            (Some(b), Some(r)) if r != OpReq::Null => Sink {
                slice: Some(b.slice_mut::<T>()),
                add: r == OpReq::Add,
            },
            _ => Sink {
                slice: None,
                add: false,
            },
        }
    }

    /// True if the output is to be added to.
    pub fn add(&self) -> bool {
        self.add
    }

    /// True if the output is wanted at all.
    pub fn wanted(&self) -> bool {
        self.slice.is_some()
    }

    /// The memory, if wanted.
    pub fn into_slice(self) -> Option<&'a mut [T]> {
        self.slice
    }

    /// Writes (or adds) `v` element-wise.
    pub fn store(self, v: &[T]) {
        let add = self.add;
        if let Some(dst) = self.slice {
            if add {
                dst.iter_mut().zip(v).for_each(|(d, &x)| *d = d.add(x));
            } else {
                dst.copy_from_slice(v);
            }
        }
    }
}

/// Stores the sum of per-chunk partial results into `sink`.
pub fn reduce_partials<T: Num>(sink: Sink<T>, parts: &[Vec<T>]) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if !sink.wanted() {
        return;
    }
    if rest.is_empty() {
        sink.store(first);
        return;
    }
    let mut total = first.clone();
    for p in rest {
        total.iter_mut().zip(p).for_each(|(t, &v)| *t = t.add(v));
    }
    sink.store(&total);
}
