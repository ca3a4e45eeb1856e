// Kernels of `CTCLoss`: the forward, which gives each batch element's loss and, when asked,
// the gradient of the loss with respect to the activations (MXNet computes it in the
// forward and keeps it for the backward), and the backward, which scales that gradient by
// the head gradient.
//
// One block takes a batch element at a time: its threads check the lengths and labels,
// take the log-softmax of the element's time steps, run the forward (alpha) and backward
// (beta) recursions over the extended label together, one time step and one barrier at a
// time, and turn alpha + beta into the gradient. Everything runs in log space in float
// (double for float64 data), as Graves' CTC and warp-ctc's CPU code compute it; every sum
// runs in a fixed order, so the results do not depend on the order threads run.
//
// `ctc_loss` runs blocks of at most RSMX_CTC_THREADS threads over any grid, each block
// taking elements blockIdx.x, blockIdx.x + gridDim.x, ... State indices of the extended
// label (2 * Lmax + 1 of them) must fit an int.
#include "common.cuh"

#define RSMX_CTC_THREADS 256

// At most 64 registers a thread (4 blocks of 256 per multiprocessor); the host build has
// no launch bounds.
#ifdef __CUDACC_RTC__
#define RSMX_CTC_BOUNDS __launch_bounds__(RSMX_CTC_THREADS, 4)
#else
#define RSMX_CTC_BOUNDS
#endif

// What `ctc_loss` writes to `status` for each element; the host raises an error on any
// but RSMX_CTC_OK.
enum rsmx_ctc_status { RSMX_CTC_OK, RSMX_CTC_BAD_LABEL, RSMX_CTC_BAD_DATA_LENGTH,
                       RSMX_CTC_BAD_LABEL_LENGTH };

// How `ctc_combine` combines.
enum rsmx_ctc_op { RSMX_CTC_SUM, RSMX_CTC_MAX, RSMX_CTC_MIN };

__device__ __forceinline__ float ctc_exp(float x) { return expf(x); }
__device__ __forceinline__ double ctc_exp(double x) { return exp(x); }
__device__ __forceinline__ float ctc_log(float x) { return logf(x); }
__device__ __forceinline__ double ctc_log(double x) { return log(x); }
__device__ __forceinline__ float ctc_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double ctc_log1p(double x) { return log1p(x); }

// log(exp(a) + exp(b)), -inf standing for a zero probability.
template <typename C>
__device__ __forceinline__ C ctc_log_plus(C a, C b) {
  const C ninf = (C)-INFINITY;
  if (b == ninf) return a;
  if (a == ninf) return b;
  return (a > b ? a : b) + ctc_log1p(ctc_exp(a > b ? b - a : a - b));
}

// Combines `v` over each group of `lanes` consecutive threads in a fixed tree through
// shared memory `buf`; every thread gets its group's result. All threads must call it.
template <typename V>
__device__ __forceinline__ V ctc_combine(V* buf, V v, int op, int lanes) {
  if (lanes == 1) return v;
  const int t = threadIdx.x, lane = t % lanes;
  __syncthreads();  // the previous readers of `buf` are done
  buf[t] = v;
  int top = 1;
  while (top < lanes) top <<= 1;
  for (int s = top >> 1; s > 0; s >>= 1) {
    __syncthreads();
    if (lane < s && lane + s < lanes && t + s < (int)blockDim.x) {
      const V o = buf[t + s];
      buf[t] = op == RSMX_CTC_SUM ? buf[t] + o
               : op == RSMX_CTC_MAX ? (o > buf[t] ? o : buf[t])
                                    : (o < buf[t] ? o : buf[t]);
    }
  }
  __syncthreads();
  return buf[t - lane];
}

// The symbol of state s of the extended label: the blank at even states, a label at odd
// ones. `z` holds the labels at the odd states only (see `ctc_loss`).
__device__ __forceinline__ int ctc_symbol(const int* z, int s, int blank) {
  return (s & 1) ? z[s] : blank;
}

// One step of either recursion at state s, whose symbol is c and emission e: the log-sum
// of the previous row's states s, s + d and, where allowed, s + 2d, plus e. Alpha, the
// log-probability of the paths through steps 0 .. t that end in state s, steps forward
// (d = -1, the previous row is t - 1); beta, that of the paths through t .. Tb - 1 that
// start in s, backward (d = +1, row t + 1). Both include step t's emission.
template <typename C>
__device__ __forceinline__ C ctc_step(const C* prev, const int* z, int s, int d,
                                      int Sb, int c, int blank, C e) {
  C a = prev[s];
  const int s1 = s + d, s2 = s + 2 * d;
  if (s1 >= 0 && s1 < Sb) a = ctc_log_plus(a, prev[s1]);
  // Skipping the blank in between: only from a label to a different label. A label equal
  // to the blank's index counts as the blank here.
  if ((s & 1) && s2 >= 0 && s2 < Sb && c != blank && c != z[s2]) {
    a = ctc_log_plus(a, prev[s2]);
  }
  return a + e;
}

// The blank channel's occupancy at a step: log of the sum of alpha_t(s) + beta_t(s) over
// its states, the even ones and any label equal to the blank, in increasing order.
template <typename C>
__device__ __forceinline__ C ctc_occupancy_blank(const C* a, const C* b, const int* z,
                                                 rsmx_i64 Sb, int blank) {
  C o = (C)-INFINITY;
  for (rsmx_i64 s = 0; s < Sb; ++s) {
    if (!(s & 1) || z[s] == blank) o = ctc_log_plus(o, a[s] + b[s]);
  }
  return o;
}

// Loss (and gradient) of CTC for each of the N elements; see the header comment. `work`
// holds, per element, lp[Tmax * A] (the log-softmax), alpha[Tmax * S] and beta[Tmax * S]
// with S = 2 * Lmax + 1; `ext` holds S ints per element: the labels at the odd states of
// the extended label and, at the even state s + 1 after odd state s (whose symbol, the
// blank, needs no storing), the next odd state with the same label, the first one after
// the last, so the states of a label form a cycle in increasing order.
template <typename T>
__device__ void ctc_loss(const T* data, const double* label, const double* data_len,
                         const double* label_len, T* loss, T* grad,
                         typename rsmx_num<T>::compute* work, int* ext, int* status,
                         rsmx_i64 Tmax, rsmx_i64 N, rsmx_i64 A, rsmx_i64 Lmax,
                         int blank_last) {
  typedef typename rsmx_num<T>::compute C;
  __shared__ C buf[RSMX_CTC_THREADS];
  __shared__ rsmx_i64 ibuf[RSMX_CTC_THREADS];
  // Every launch reaches a barrier: the host emulation runs a kernel without fibers once
  // a launch of it reached none.
  __syncthreads();
  const C ninf = (C)-INFINITY;
  const int nt = blockDim.x, tid = threadIdx.x;
  const rsmx_i64 S = 2 * Lmax + 1;
  const int blank = blank_last ? (int)(A - 1) : 0;
  const double pad = blank_last ? -1.0 : 0.0;
  for (rsmx_i64 b = blockIdx.x; b < N; b += gridDim.x) {
    const double* lab = label + b * Lmax;
    int* z = ext + b * S;
    C* lp = work + b * (Tmax * A + 2 * Tmax * S);
    C* alpha = lp + Tmax * A;
    C* beta = alpha + Tmax * S;

    // Lengths and labels round half away from zero, as MXNet's lround does; a NaN fails
    // every range test. Every thread reaches the same verdict.
    int st = A < 1 ? RSMX_CTC_BAD_LABEL : RSMX_CTC_OK;  // no channel for the blank
    rsmx_i64 Tb = Tmax, L = 0, repeats = 0;
    if (data_len) {
      const double v = round(data_len[b]);
      if (v >= 0.0 && v <= (double)Tmax) Tb = (rsmx_i64)v;
      else st = RSMX_CTC_BAD_DATA_LENGTH;
    }
    if (label_len) {
      const double v = round(label_len[b]);
      if (v >= 0.0 && v <= (double)Lmax) L = (rsmx_i64)v;
      else if (st == RSMX_CTC_OK) st = RSMX_CTC_BAD_LABEL_LENGTH;
    } else {
      // The label ends at the first padding value; anything after it is ignored.
      rsmx_i64 first = Lmax;
      for (rsmx_i64 j = tid; j < Lmax; j += nt) {
        if (round(lab[j]) == pad) { first = j; break; }
      }
      L = ctc_combine(ibuf, first, RSMX_CTC_MIN, nt);
    }
    if (st == RSMX_CTC_OK) {
      // Check the labels, store them at the odd states and count adjacent repeats, each of
      // which needs a blank between them and so one more time step.
      rsmx_i64 bad = 0, rep = 0;
      for (rsmx_i64 i = tid; i < L; i += nt) {
        const double v = round(lab[i]);
        if (v >= 0.0 && v < (double)A) {
          z[2 * i + 1] = (int)v;
          rep += i >= 1 && round(lab[i - 1]) == v;
        } else {
          bad = 1;
        }
      }
      if (ctc_combine(ibuf, bad, RSMX_CTC_SUM, nt) != 0) st = RSMX_CTC_BAD_LABEL;
      repeats = ctc_combine(ibuf, rep, RSMX_CTC_SUM, nt);  // its barriers publish z
    }
    const rsmx_i64 Sb = 2 * L + 1;
    // An infeasible label (too long for Tb steps; with Tb = 0, any label) gives loss 0, as
    // MXNet's, and a zero gradient, where MXNet leaves it unwritten.
    const bool live = st == RSMX_CTC_OK && L + repeats <= Tb && Tb > 0;
    if (tid == 0) {
      status[b] = st;
      const C nan = (C)__int_as_float(0x7fc00000);
      if (!live) loss[b] = rsmx_num<T>::store(st == RSMX_CTC_OK ? (C)0 : nan);
    }
    if (!live) {
      if (grad) {
        for (rsmx_i64 q = tid; q < Tmax * A; q += nt) {
          const rsmx_i64 t = q / A;
          grad[(t * N + b) * A + (q - t * A)] = rsmx_num<T>::store((C)0);
        }
      }
      continue;
    }

    // Link each label's states into a cycle (see above): the next state with that label,
    // else the first. Reads only odd states while writing only even ones.
    for (rsmx_i64 i = tid; i < L; i += nt) {
      const int c = z[2 * i + 1];
      rsmx_i64 j = i + 1;
      while (j < L && z[2 * j + 1] != c) ++j;
      if (j == L) {
        j = 0;
        while (z[2 * j + 1] != c) ++j;
      }
      z[2 * i + 2] = (int)(2 * j + 1);
    }

    // The log-softmax of each step's activations: a group of `lanes` threads per step,
    // each taking every lanes-th channel, so both short and long rows keep threads busy.
    int lanes = 1;
    while (lanes < A && lanes < 32) lanes <<= 1;
    const int rows = nt / lanes, lane = tid % lanes;
    for (rsmx_i64 t0 = 0; t0 < Tb; t0 += rows) {
      const rsmx_i64 t = t0 + tid / lanes;
      const bool mine = tid / lanes < rows && t < Tb;
      const T* x = data + (t * N + b) * A;
      C m = ninf;
      if (mine) {
        for (rsmx_i64 k = lane; k < A; k += lanes) {
          const C v = rsmx_num<T>::load(x[k]);
          m = v > m ? v : m;
        }
      }
      m = ctc_combine(buf, m, RSMX_CTC_MAX, lanes);
      C sum = (C)0;
      if (mine) {
        for (rsmx_i64 k = lane; k < A; k += lanes) {
          sum += ctc_exp(rsmx_num<T>::load(x[k]) - m);
        }
      }
      sum = ctc_combine(buf, sum, RSMX_CTC_SUM, lanes);
      if (mine) {
        const C ls = ctc_log(sum);
        for (rsmx_i64 k = lane; k < A; k += lanes) {
          lp[t * A + k] = (rsmx_num<T>::load(x[k]) - m) - ls;
        }
      }
    }
    __syncthreads();  // lp and the links are complete

    // Alpha forward from step 0 and, for the gradient, beta backward from step Tb - 1,
    // side by side: a thread per state of either, one barrier per step.
    // State indices as ints spare registers in this, the busiest loop.
    const int sb = (int)Sb, items = grad ? 2 * sb : sb;
    for (rsmx_i64 step = 0; step < Tb; ++step) {
      for (int q = tid; q < items; q += nt) {
        const bool fwd = q < sb;
        const int s = fwd ? q : q - sb;
        const rsmx_i64 t = fwd ? step : Tb - 1 - step;
        C* row = (fwd ? alpha : beta) + t * S;
        const int c = ctc_symbol(z, s, blank);
        const C e = lp[t * A + c];
        if (step == 0) {
          // Paths start in the first blank or the first label, and end in the last ones.
          row[s] = (fwd ? s <= 1 : s >= sb - 2) ? e : ninf;
        } else {
          row[s] = ctc_step(fwd ? row - S : row + S, z, s, fwd ? -1 : 1, sb, c, blank, e);
        }
      }
      __syncthreads();
    }
    // log P: the paths ending in the last blank or the last label. Every thread needs it.
    const C* last = alpha + (Tb - 1) * S;
    const C logp = L > 0 ? ctc_log_plus(last[Sb - 1], last[Sb - 2]) : last[Sb - 1];
    if (tid == 0) loss[b] = rsmx_num<T>::store(-logp);
    if (!grad) continue;

    // The gradient with respect to the activations: softmax minus the posterior occupancy
    // of the channel. First the softmax everywhere (0 past Tb) ...
    for (rsmx_i64 q = tid; q < Tmax * A; q += nt) {
      const rsmx_i64 t = q / A;
      const C g = t < Tb ? ctc_exp(lp[q]) : (C)0;
      grad[(t * N + b) * A + (q - t * A)] = rsmx_num<T>::store(g);
    }
    __syncthreads();  // ... then, over it, the channels of the extended label's symbols
    // Item (t, j): j = 0 takes the blank's channel (its states are the even ones and any
    // label equal to the blank), j >= 1 the channel of label j - 1 if its state is the
    // last of its cycle, summing the cycle from its first state, so one item writes each
    // channel and its sum runs in increasing state order.
    for (rsmx_i64 q = tid; q < Tb * (L + 1); q += nt) {
      const rsmx_i64 t = q / (L + 1), j = q - t * (L + 1);
      const C* a = alpha + t * S;
      const C* be = beta + t * S;
      int k = blank;
      C o;
      if (j == 0) {
        o = ctc_occupancy_blank(a, be, z, Sb, blank);
      } else {
        const rsmx_i64 s = 2 * j - 1;
        k = z[s];
        if (k == blank || z[s + 1] > s) continue;
        o = ninf;
        for (rsmx_i64 u = z[s + 1];; u = z[u + 1]) {
          o = ctc_log_plus(o, a[u] + be[u]);
          if (u == s) break;
        }
      }
      if (o != ninf) {
        const C l = lp[t * A + k];
        grad[(t * N + b) * A + k] = rsmx_num<T>::store(ctc_exp(l) - ctc_exp(o - l - logp));
      }
    }
  }
}

// out (=|+=) ograd[n] * grad for the (Tmax, N, A) gradient: the head gradient of each
// element's loss, broadcast over its time steps and channels. The product is rounded to T
// first, then added in T's arithmetic, as the CPU kernel adds.
template <typename T>
__device__ void ctc_scale(T* out, const T* grad, const T* ograd, rsmx_i64 total, rsmx_i64 N,
                          rsmx_i64 A, int add) {
  RSMX_GRID_LOOP(i, total) {
    T v = rsmx_num<T>::store(rsmx_num<T>::load(ograd[(i / A) % N]) *
                             rsmx_num<T>::load(grad[i]));
    if (add) v = rsmx_num<T>::store(rsmx_num<T>::load(out[i]) + rsmx_num<T>::load(v));
    out[i] = v;
  }
}

// ---- instantiations -------------------------------------------------------------------

#define RSMX_CTC_LOSS(kernel, T, suffix)                                                   \
  extern "C" __global__ void RSMX_CTC_BOUNDS kernel##_##suffix(                            \
      const T* data, const double* label, const double* data_len, const double* label_len, \
      T* loss, T* grad, rsmx_num<T>::compute* work, int* ext, int* status, rsmx_i64 Tmax,  \
      rsmx_i64 N, rsmx_i64 A, rsmx_i64 Lmax, int blank_last) {                             \
    kernel<T>(data, label, data_len, label_len, loss, grad, work, ext, status, Tmax, N, A, \
              Lmax, blank_last);                                                           \
  }
#define RSMX_CTC_SCALE(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* grad, const T* ograd,      \
                                               rsmx_i64 total, rsmx_i64 N, rsmx_i64 A,     \
                                               int add) {                                  \
    kernel<T>(out, grad, ograd, total, N, A, add);                                         \
  }

RSMX_DTYPE_FLOAT(RSMX_CTC_LOSS, ctc_loss)
RSMX_DTYPE_FLOAT(RSMX_CTC_SCALE, ctc_scale)
