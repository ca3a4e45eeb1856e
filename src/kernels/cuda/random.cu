// Random draws on the device from a counter-based generator: element i of a launch takes
// the SplitMix64 hash of (key, i), so the result depends only on the key the host draws
// from the device's generator for the launch, never on how threads are scheduled.
#include "common.cuh"

typedef unsigned long long rsmx_rand_u64;

__device__ __forceinline__ rsmx_rand_u64 rsmx_splitmix(rsmx_rand_u64 z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform double in [0, 1) from draw `d` of element `i`.
__device__ __forceinline__ double rsmx_uniform01(rsmx_rand_u64 key, rsmx_i64 i, int d) {
  rsmx_rand_u64 h = rsmx_splitmix(key ^ rsmx_splitmix((rsmx_rand_u64)i * 2ull + (rsmx_rand_u64)d));
  return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

template <typename T>
__device__ void random_uniform(T* out, rsmx_i64 n, rsmx_rand_u64 key, double low, double high,
                               int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    C v = (C)(low + (high - low) * rsmx_uniform01(key, i, 0));
    out[i] = rsmx_num<T>::store(add ? rsmx_num<T>::load(out[i]) + v : v);
  }
}

// Box-Muller: the first uniform is moved to (0, 1] so its logarithm is finite.
template <typename T>
__device__ void random_normal(T* out, rsmx_i64 n, rsmx_rand_u64 key, double loc, double scale,
                              int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    double u1 = 1.0 - rsmx_uniform01(key, i, 0), u2 = rsmx_uniform01(key, i, 1);
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    C v = (C)(loc + scale * z);
    out[i] = rsmx_num<T>::store(add ? rsmx_num<T>::load(out[i]) + v : v);
  }
}

#define RSMX_RANDOM(kernel, T, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_i64 n, rsmx_rand_u64 key,      \
                                               double a, double b, int add) {              \
    kernel<T>(out, n, key, a, b, add);                                                     \
  }
RSMX_DTYPE_FLOAT(RSMX_RANDOM, random_uniform)
RSMX_DTYPE_FLOAT(RSMX_RANDOM, random_normal)

// ---------------------------------------------------------------------------------------
// Samplers with parameters per element (`_sample_*`), `_sample_multinomial` and
// `_shuffle`. An element with rejection loops draws from its own stream: SplitMix64's
// sequence from a state seeded by (key, element).

struct rsmx_stream {
  rsmx_rand_u64 s;
};

__device__ __forceinline__ rsmx_stream rsmx_stream_at(rsmx_rand_u64 key, rsmx_i64 i) {
  rsmx_stream st;
  st.s = rsmx_splitmix(key ^ rsmx_splitmix((rsmx_rand_u64)i));
  return st;
}

// A uniform double in [0, 1).
__device__ __forceinline__ double rsmx_next01(rsmx_stream* st) {
  rsmx_rand_u64 h = rsmx_splitmix(st->s);
  st->s += 0x9E3779B97F4A7C15ull;
  return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ double rsmx_next_normal(rsmx_stream* st) {
  double u1 = 1.0 - rsmx_next01(st), u2 = rsmx_next01(st);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// Shape alpha, scale beta (Marsaglia and Tsang; shapes below 1 boosted); NaN for invalid
// parameters.
__device__ double rsmx_gamma(rsmx_stream* st, double alpha, double beta) {
  if (!(alpha > 0.0) || !(beta > 0.0) || 1.0 / beta == 0.0) return nan("");
  double boost = 1.0;
  if (alpha < 1.0) {
    boost = pow(1.0 - rsmx_next01(st), 1.0 / alpha);
    alpha += 1.0;
  }
  const double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x = rsmx_next_normal(st), v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    double u = rsmx_next01(st);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * beta * boost;
    if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v * beta * boost;
  }
}

// Poisson with rate lam (multiplication of uniforms below 12, else Hormann's transformed
// rejection); 0 for a rate that is not positive, NaN for NaN or infinity.
__device__ double rsmx_poisson(rsmx_stream* st, double lam) {
  if (lam != lam || lam == INFINITY) return nan("");
  if (lam <= 0.0) return 0.0;
  if (lam < 12.0) {
    const double limit = exp(-lam);
    double prod = rsmx_next01(st), k = 0.0;
    while (prod > limit) {
      prod *= rsmx_next01(st);
      k += 1.0;
    }
    return k;
  }
  const double slam = sqrt(lam), loglam = log(lam);
  const double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
  const double invalpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2.0);
  for (;;) {
    double u = rsmx_next01(st) - 0.5, v = rsmx_next01(st);
    double us = 0.5 - fabs(u);
    double k = floor((2.0 * a / us + b) * u + lam + 0.43);
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0.0 || (us < 0.013 && v > us)) continue;
    if (log(v) + log(invalpha) - log(a / (us * us) + b) <= -lam + k * loglam - lgamma(k + 1.0))
      return k;
  }
}

enum rsmx_sample {
  RSMX_SAMPLE_UNIFORM, RSMX_SAMPLE_NORMAL, RSMX_SAMPLE_EXPONENTIAL, RSMX_SAMPLE_GAMMA,
  RSMX_SAMPLE_POISSON, RSMX_SAMPLE_NEGATIVE_BINOMIAL, RSMX_SAMPLE_GENERALIZED_NEGATIVE_BINOMIAL
};

__device__ double rsmx_sample_draw(rsmx_stream* st, int kind, double a, double b) {
  switch (kind) {
    case RSMX_SAMPLE_NORMAL: return a + b * rsmx_next_normal(st);
    case RSMX_SAMPLE_EXPONENTIAL: return -log(1.0 - rsmx_next01(st)) / a;
    case RSMX_SAMPLE_GAMMA: return rsmx_gamma(st, a, b);
    case RSMX_SAMPLE_POISSON: return rsmx_poisson(st, a);
    case RSMX_SAMPLE_NEGATIVE_BINOMIAL:
      if (a <= 0.0 || b >= 1.0) return 0.0;
      return rsmx_poisson(st, rsmx_gamma(st, a, (1.0 - b) / b));
    case RSMX_SAMPLE_GENERALIZED_NEGATIVE_BINOMIAL:
      if (b == 0.0) return rsmx_poisson(st, a);
      if (a <= 0.0) return 0.0;
      return rsmx_poisson(st, rsmx_gamma(st, 1.0 / b, b * a));
    default: return a + (b - a) * rsmx_next01(st);
  }
}

// Every parameter element i gets m draws, out[i * m .. (i + 1) * m]; `pb` may be null
// (one parameter). A uniform draw that rounds to `high` in T is drawn again (for finite
// ranges that T tells apart), as the CPU does.
template <typename T>
__device__ void sample(T* out, rsmx_i64 n, rsmx_i64 m, const double* pa, const double* pb,
                       int kind, rsmx_rand_u64 key, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(e, n) {
    rsmx_i64 i = e / m;
    double a = pa[i], b = pb ? pb[i] : 0.0;
    rsmx_stream st = rsmx_stream_at(key, e);
    C v = (C)rsmx_sample_draw(&st, kind, a, b);
    if (kind == RSMX_SAMPLE_UNIFORM) {
      C hi = rsmx_num<T>::load(rsmx_num<T>::store((C)b));
      C lo = rsmx_num<T>::load(rsmx_num<T>::store((C)a));
      bool checked = a - a == 0.0 && b - b == 0.0 && b > a && hi - hi == (C)0 && lo < hi;
      while (checked && !(rsmx_num<T>::load(rsmx_num<T>::store(v)) < hi)) {
        v = (C)rsmx_sample_draw(&st, kind, a, b);
      }
    }
    out[e] = rsmx_num<T>::store(add ? rsmx_num<T>::load(out[e]) + v : v);
  }
}

// The category of each draw from the probabilities in rows of k (the first whose running
// sum passes a uniform draw; else the last positive one), and its log-probability into
// `logp` unless null.
template <typename T>
__device__ void multinomial(const T* probs, rsmx_i64 n, rsmx_i64 m, rsmx_i64 k,
                            rsmx_rand_u64 key, rsmx_i64* cats, T* logp, int logp_add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(e, n) {
    const T* row = probs + (e / m) * k;
    double u = rsmx_uniform01(key, e, 0), acc = 0.0;
    rsmx_i64 pick = -1, last = k - 1;
    for (rsmx_i64 j = k - 1; j >= 0; j--) {
      if ((double)rsmx_num<T>::load(row[j]) > 0.0) {
        last = j;
        break;
      }
    }
    for (rsmx_i64 j = 0; j < k && pick < 0; j++) {
      acc += (double)rsmx_num<T>::load(row[j]);
      if (acc > u) pick = j;
    }
    if (pick < 0) pick = last;
    cats[e] = pick;
    if (logp) {
      C lp = (C)log((double)rsmx_num<T>::load(row[pick]));
      logp[e] = rsmx_num<T>::store(logp_add ? rsmx_num<T>::load(logp[e]) + lp : lp);
    }
  }
}

// Random sort keys of the rows for a shuffle, padded to p with keys that sort last.
extern "C" __global__ void shuffle_keys(rsmx_rand_u64* keys, rsmx_i64* idx, rsmx_i64 rows,
                                        rsmx_i64 p, rsmx_rand_u64 key) {
  RSMX_GRID_LOOP(i, p) {
    keys[i] = i < rows ? rsmx_splitmix(key ^ rsmx_splitmix((rsmx_rand_u64)i)) >> 1 : ~0ull;
    idx[i] = i;
  }
}

// out row r = in row order[r] (rows of `row` elements), or added to it.
template <typename T>
__device__ void shuffle_rows(T* out, const T* in, const rsmx_i64* order, rsmx_i64 rows,
                             rsmx_i64 row, int add) {
  RSMX_GRID_LOOP(e, rows * row) {
    rsmx_i64 r = e / row, c = e % row;
    T v = in[order[r] * row + c];
    out[e] = add ? rsmx_num<T>::store(rsmx_num<T>::load(out[e]) + rsmx_num<T>::load(v)) : v;
  }
}

// The attribute-parameter samplers other than uniform and normal: `kind` as in
// `enum rsmx_sample`.
template <typename T>
__device__ void random_dist(T* out, rsmx_i64 n, int kind, double a, double b,
                            rsmx_rand_u64 key, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(e, n) {
    rsmx_stream st = rsmx_stream_at(key, e);
    C v = (C)rsmx_sample_draw(&st, kind, a, b);
    out[e] = rsmx_num<T>::store(add ? rsmx_num<T>::load(out[e]) + v : v);
  }
}

// The high 64 bits of a * b.
__device__ __forceinline__ rsmx_rand_u64 rsmx_mulhi(rsmx_rand_u64 a, rsmx_rand_u64 b) {
  rsmx_rand_u64 al = a & 0xffffffffull, ah = a >> 32, bl = b & 0xffffffffull, bh = b >> 32;
  rsmx_rand_u64 p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
  rsmx_rand_u64 mid = (p0 >> 32) + (p1 & 0xffffffffull) + (p2 & 0xffffffffull);
  return p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
}

// Integers uniform on [low, high): a 64-bit draw scaled to the range (multiply-shift).
template <typename T>
__device__ void random_randint(T* out, rsmx_i64 n, rsmx_i64 low, rsmx_i64 high,
                               rsmx_rand_u64 key, int add) {
  const rsmx_rand_u64 range = (rsmx_rand_u64)high - (rsmx_rand_u64)low;
  RSMX_GRID_LOOP(e, n) {
    rsmx_stream st = rsmx_stream_at(key, e);
    rsmx_rand_u64 h = rsmx_splitmix(st.s);
    T v = (T)((rsmx_rand_u64)low + rsmx_mulhi(h, range));
    out[e] = add ? (T)((rsmx_rand_u64)out[e] + (rsmx_rand_u64)v) : v;
  }
}

// At most 64 registers a thread for the rejection samplers' kernels (4 blocks of 256 per
// multiprocessor); the host build has no launch bounds.
#ifdef __CUDACC_RTC__
#define RSMX_RANDOM_BOUNDS __launch_bounds__(256, 4)
#else
#define RSMX_RANDOM_BOUNDS
#endif

#define RSMX_RANDOM_DIST(kernel, T, suffix)                                             \
  extern "C" __global__ void RSMX_RANDOM_BOUNDS kernel##_##suffix(T* out, rsmx_i64 n, int kind, double a, \
                                               double b, rsmx_rand_u64 key, int add) {  \
    kernel<T>(out, n, kind, a, b, key, add);                                            \
  }
#define RSMX_RANDINT(kernel, T, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_i64 n, rsmx_i64 low,       \
                                               rsmx_i64 high, rsmx_rand_u64 key,        \
                                               int add) {                               \
    kernel<T>(out, n, low, high, key, add);                                             \
  }
RSMX_DTYPE_FLOAT(RSMX_RANDOM_DIST, random_dist)
RSMX_RANDINT(random_randint, rsmx_i32, i32)
RSMX_RANDINT(random_randint, rsmx_i64, i64)

#define RSMX_SAMPLE(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_i64 n, rsmx_i64 m,         \
                                               const double* pa, const double* pb,      \
                                               int kind, rsmx_rand_u64 key, int add) {  \
    kernel<T>(out, n, m, pa, pb, kind, key, add);                                       \
  }
#define RSMX_MULTINOMIAL(kernel, T, suffix)                                             \
  extern "C" __global__ void kernel##_##suffix(const T* probs, rsmx_i64 n, rsmx_i64 m, \
                                               rsmx_i64 k, rsmx_rand_u64 key,           \
                                               rsmx_i64* cats, T* logp, int logp_add) { \
    kernel<T>(probs, n, m, k, key, cats, logp, logp_add);                               \
  }
#define RSMX_SHUFFLE_ROWS(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in,                    \
                                               const rsmx_i64* order, rsmx_i64 rows,    \
                                               rsmx_i64 row, int add) {                 \
    kernel<T>(out, in, order, rows, row, add);                                          \
  }
RSMX_DTYPE_FLOAT(RSMX_SAMPLE, sample)
RSMX_DTYPE_FLOAT(RSMX_MULTINOMIAL, multinomial)
RSMX_DTYPE_ALL(RSMX_SHUFFLE_ROWS, shuffle_rows)
