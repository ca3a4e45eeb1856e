// Kernels of the fused RNN operator, around the cuBLAS products: the bias rows the input
// product adds to, one element-wise cell step per time step forward and backward
// (vanilla ReLU/tanh, LSTM, GRU), the dropout masks between layers, and the gathering of
// the directions' hidden states into a layer's output. Float32 and float64.
#include "common.cuh"

enum rsmx_rnn_mode { RSMX_RNN_RELU, RSMX_RNN_TANH, RSMX_RNN_LSTM, RSMX_RNN_GRU };

__device__ __forceinline__ float rnn_exp(float x) { return expf(x); }
__device__ __forceinline__ double rnn_exp(double x) { return exp(x); }
__device__ __forceinline__ float rnn_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double rnn_tanh(double x) { return tanh(x); }

template <typename T>
__device__ __forceinline__ T rnn_sigmoid(T x) {
  return (T)1 / ((T)1 + rnn_exp(-x));
}

__device__ __forceinline__ int rnn_gates(int mode) {
  return mode == RSMX_RNN_LSTM ? 4 : (mode == RSMX_RNN_GRU ? 3 : 1);
}

// Every row of the `rows × cols` gates starts as bx + bh; GRU's candidate block (columns
// from `hidden_from`) takes bx only, its bh going inside the reset gate.
template <typename T>
__device__ void rnn_bias_rows(T* out, const T* bx, const T* bh, rsmx_i64 rows, rsmx_i64 cols,
                              rsmx_i64 hidden_from) {
  RSMX_GRID_LOOP(i, rows * cols) {
    rsmx_i64 c = i % cols;
    out[i] = bx[c] + (c < hidden_from ? bh[c] : (T)0);
  }
}

// One forward step over `n × h` units: `gates` holds the input's pre-activations with the
// biases and receives the activated gates; `q` is h_prev · Whᵀ; `extra` receives LSTM's
// cell state or GRU's candidate hidden product Whn·h + bhn.
template <typename T>
__device__ void rnn_step_forward(T* gates, const T* q, const T* bh, const T* h_prev,
                                 const T* c_prev, T* extra, T* h_out, rsmx_i64 n, rsmx_i64 h,
                                 int mode, int clip, double lo, double hi, int nan_to_lo) {
  const rsmx_i64 gh = rnn_gates(mode) * h;
  RSMX_GRID_LOOP(i, n * h) {
    const rsmx_i64 r = i / h, j = i % h;
    T* g = gates + r * gh;
    const T* p = q + r * gh;
    if (mode == RSMX_RNN_RELU) {
      T a = g[j] + p[j];
      a = a > (T)0 ? a : (T)0;
      g[j] = a;
      h_out[i] = a;
    } else if (mode == RSMX_RNN_TANH) {
      T a = rnn_tanh(g[j] + p[j]);
      g[j] = a;
      h_out[i] = a;
    } else if (mode == RSMX_RNN_LSTM) {
      T ig = rnn_sigmoid(g[j] + p[j]);
      T fg = rnn_sigmoid(g[h + j] + p[h + j]);
      T cg = rnn_tanh(g[2 * h + j] + p[2 * h + j]);
      T og = rnn_sigmoid(g[3 * h + j] + p[3 * h + j]);
      T c = fg * c_prev[i] + ig * cg;
      if (clip) {
        if (c != c) {
          if (nan_to_lo) c = (T)lo;
        } else {
          c = c < (T)lo ? (T)lo : (c > (T)hi ? (T)hi : c);
        }
      }
      g[j] = ig;
      g[h + j] = fg;
      g[2 * h + j] = cg;
      g[3 * h + j] = og;
      extra[i] = c;
      h_out[i] = og * rnn_tanh(c);
    } else {
      T rg = rnn_sigmoid(g[j] + p[j]);
      T z = rnn_sigmoid(g[h + j] + p[h + j]);
      T hn = p[2 * h + j] + bh[2 * h + j];
      T cand = rnn_tanh(g[2 * h + j] + rg * hn);
      g[j] = rg;
      g[h + j] = z;
      g[2 * h + j] = cand;
      extra[i] = hn;
      h_out[i] = ((T)1 - z) * cand + z * h_prev[i];
    }
  }
}

// One backward step. The hidden state's gradient is the layer output's (`dout`, rows
// `dout_stride` apart, this direction's columns from `dout_off`) plus `dh_next`; LSTM's
// cell gradient `dc` is read and replaced by the previous cell state's. Writes the
// pre-activation gradients of the input product (`dgx`) and, for GRU, of the hidden
// product (`dgh`), and leaves in `dh_next` GRU's part of the previous hidden state's
// gradient that bypasses the hidden product (the others' is all in that product).
template <typename T>
__device__ void rnn_step_backward(const T* gates, const T* extra, const T* h_prev,
                                  const T* c_prev, const T* dout, rsmx_i64 dout_stride,
                                  rsmx_i64 dout_off, T* dh_next, T* dc, T* dgx, T* dgh,
                                  rsmx_i64 n, rsmx_i64 h, int mode, int clip, double lo,
                                  double hi) {
  const rsmx_i64 gh = rnn_gates(mode) * h;
  const T one = (T)1;
  RSMX_GRID_LOOP(i, n * h) {
    const rsmx_i64 r = i / h, j = i % h;
    const T* g = gates + r * gh;
    T* d = dgx + r * gh;
    const T dh = dout[r * dout_stride + dout_off + j] + dh_next[i];
    if (mode == RSMX_RNN_RELU) {
      d[j] = g[j] > (T)0 ? dh : (T)0;
    } else if (mode == RSMX_RNN_TANH) {
      d[j] = dh * (one - g[j] * g[j]);
    } else if (mode == RSMX_RNN_LSTM) {
      const T ig = g[j], fg = g[h + j], cg = g[2 * h + j], og = g[3 * h + j];
      const T tc = rnn_tanh(extra[i]);
      T dcv = dc[i] + dh * og * (one - tc * tc);
      if (clip) {
        const T raw = fg * c_prev[i] + ig * cg;
        if (!(raw >= (T)lo && raw <= (T)hi)) dcv = (T)0;
      }
      d[j] = dcv * cg * ig * (one - ig);
      d[h + j] = dcv * c_prev[i] * fg * (one - fg);
      d[2 * h + j] = dcv * ig * (one - cg * cg);
      d[3 * h + j] = dh * tc * og * (one - og);
      dc[i] = dcv * fg;
    } else {
      const T rg = g[j], z = g[h + j], cand = g[2 * h + j];
      const T dn = dh * (one - z) * (one - cand * cand);
      const T dr = dn * extra[i] * rg * (one - rg);
      const T dz = dh * (h_prev[i] - cand) * z * (one - z);
      T* q = dgh + r * gh;
      d[j] = dr;
      d[h + j] = dz;
      d[2 * h + j] = dn;
      q[j] = dr;
      q[h + j] = dz;
      q[2 * h + j] = dn * rg;
      dh_next[i] = dh * z;
    }
  }
}

// Dropout masks: kept (scaled by 1/keep) where a 32-bit draw falls below `threshold`
// while training, all ones otherwise.
template <typename T>
__device__ void rnn_dropout_mask(T* mask, rsmx_i64 n, unsigned long long seed,
                                 unsigned long long threshold, double scale, int train) {
  RSMX_GRID_LOOP(i, n) {
    mask[i] = train ? ((rsmx_hash(seed, i) >> 32) < threshold ? (T)scale : (T)0) : (T)1;
  }
}

// A layer's output (`rows × dirs·h`) from each direction's hidden states (`rows × h`),
// times `mask` when given; `add` accumulates.
template <typename T>
__device__ void rnn_gather(T* out, const T* hs0, const T* hs1, const T* mask, rsmx_i64 rows,
                           rsmx_i64 h, int dirs, int add) {
  RSMX_GRID_LOOP(i, rows * dirs * h) {
    const rsmx_i64 row = i / (dirs * h), c = i % (dirs * h);
    T v = (c < h ? hs0 : hs1)[row * h + c % h];
    if (mask) v *= mask[i];
    out[i] = add ? out[i] + v : v;
  }
}

// out (=|+=) in, or in · m element-wise when `m` is given.
template <typename T>
__device__ void rnn_store(T* out, const T* in, const T* m, rsmx_i64 n, int add) {
  RSMX_GRID_LOOP(i, n) {
    T v = m ? in[i] * m[i] : in[i];
    out[i] = add ? out[i] + v : v;
  }
}

#define RSMX_RNN_BIAS_ROWS(kernel, T, suffix)                                              \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* bx, const T* bh,          \
                                               rsmx_i64 rows, rsmx_i64 cols,             \
                                               rsmx_i64 hidden_from) {                   \
    kernel<T>(out, bx, bh, rows, cols, hidden_from);                                      \
  }
#define RSMX_RNN_STEP_FORWARD(kernel, T, suffix)                                             \
  extern "C" __global__ void kernel##_##suffix(                                             \
      T* gates, const T* q, const T* bh, const T* h_prev, const T* c_prev, T* extra,        \
      T* h_out, rsmx_i64 n, rsmx_i64 h, int mode, int clip, double lo, double hi,           \
      int nan_to_lo) {                                                                      \
    kernel<T>(gates, q, bh, h_prev, c_prev, extra, h_out, n, h, mode, clip, lo, hi,         \
              nan_to_lo);                                                                   \
  }
#define RSMX_RNN_STEP_BACKWARD(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(                                             \
      const T* gates, const T* extra, const T* h_prev, const T* c_prev, const T* dout,      \
      rsmx_i64 dout_stride, rsmx_i64 dout_off, T* dh_next, T* dc, T* dgx, T* dgh,           \
      rsmx_i64 n, rsmx_i64 h, int mode, int clip, double lo, double hi) {                   \
    kernel<T>(gates, extra, h_prev, c_prev, dout, dout_stride, dout_off, dh_next, dc, dgx,  \
              dgh, n, h, mode, clip, lo, hi);                                               \
  }
#define RSMX_RNN_DROPOUT_MASK(kernel, T, suffix)                                           \
  extern "C" __global__ void kernel##_##suffix(T* mask, rsmx_i64 n,                       \
                                               unsigned long long seed,                  \
                                               unsigned long long threshold,             \
                                               double scale, int train) {                \
    kernel<T>(mask, n, seed, threshold, scale, train);                                    \
  }
#define RSMX_RNN_GATHER(kernel, T, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* hs0, const T* hs1,        \
                                               const T* mask, rsmx_i64 rows, rsmx_i64 h, \
                                               int dirs, int add) {                      \
    kernel<T>(out, hs0, hs1, mask, rows, h, dirs, add);                                   \
  }
#define RSMX_RNN_STORE(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, const T* m,           \
                                               rsmx_i64 n, int add) {                    \
    kernel<T>(out, in, m, n, add);                                                        \
  }

RSMX_DTYPE_REAL(RSMX_RNN_BIAS_ROWS, rnn_bias_rows)
RSMX_DTYPE_REAL(RSMX_RNN_STEP_FORWARD, rnn_step_forward)
RSMX_DTYPE_REAL(RSMX_RNN_STEP_BACKWARD, rnn_step_backward)
RSMX_DTYPE_REAL(RSMX_RNN_DROPOUT_MASK, rnn_dropout_mask)
RSMX_DTYPE_REAL(RSMX_RNN_GATHER, rnn_gather)
RSMX_DTYPE_REAL(RSMX_RNN_STORE, rnn_store)
