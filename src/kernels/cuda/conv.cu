// Kernels of the convolution layers: unfolding images into column matrices (im2col), the
// adjoint folding as a gather (col2im: each image element sums the column entries that
// read it, in a fixed order, so no atomics), the bias added per channel, the bias gradient
// as a block reduction per channel, and the weight gradient summed over per-image products.
// Matrix products run in cuBLAS. Spatial extents are three (depth, height, width);
// lower-dimensional windows have leading ones.
#include "common.cuh"

// The shapes of one unfolding: `channels` planes of extent `in`, a window and the grid of
// window positions `out` (`struct ColGeom` of the operators).
struct rsmx_col_geom {
  rsmx_i64 channels;
  int in[3], out[3], k[3], s[3], d[3], p[3];
};

// Most threads per block the bias gradient's reduction serves.
#define RSMX_CONV_MAX_BLOCK 1024

// `v` rounded to T and back: float16 sums round at every step, as the CPU kernels' do.
template <typename T>
__device__ __forceinline__ typename rsmx_num<T>::compute conv_round(
    typename rsmx_num<T>::compute v) {
  return rsmx_num<T>::load(rsmx_num<T>::store(v));
}

// One column matrix per image (`rows x cols`, rows ordered channel, then kernel taps
// outermost first): col[i] for every element of `nimg` images; padded taps read zero.
template <typename T>
__device__ void im2col(T* col, const T* img, rsmx_i64 n, rsmx_col_geom g) {
  const int cols = g.out[0] * g.out[1] * g.out[2];
  const int taps = g.k[0] * g.k[1] * g.k[2];
  const rsmx_i64 rows = g.channels * taps;
  const rsmx_i64 plane = (rsmx_i64)g.in[0] * g.in[1] * g.in[2];
  RSMX_GRID_LOOP(i, n) {
    const int j = (int)(i % cols);
    const rsmx_i64 r = (i / cols) % rows;
    const rsmx_i64 image = i / cols / rows;
    const int tap = (int)(r % taps);
    const rsmx_i64 c = r / taps;
    const int kw = tap % g.k[2], kh = (tap / g.k[2]) % g.k[1], kd = tap / g.k[2] / g.k[1];
    const int ow = j % g.out[2], oh = (j / g.out[2]) % g.out[1], od = j / g.out[2] / g.out[1];
    const int zd = od * g.s[0] + kd * g.d[0] - g.p[0];
    const int zh = oh * g.s[1] + kh * g.d[1] - g.p[1];
    const int zw = ow * g.s[2] + kw * g.d[2] - g.p[2];
    T v = rsmx_num<T>::store((typename rsmx_num<T>::compute)0);
    if (zd >= 0 && zd < g.in[0] && zh >= 0 && zh < g.in[1] && zw >= 0 && zw < g.in[2]) {
      v = img[(image * g.channels + c) * plane + ((rsmx_i64)zd * g.in[1] + zh) * g.in[2] + zw];
    }
    col[i] = v;
  }
}

// The window positions along one dimension whose tap `t` reads coordinate `z`: -1 if none.
__device__ __forceinline__ int conv_source(int z, int t, int s, int d, int p, int out) {
  const int num = z + p - t * d;
  if (num < 0 || num % s != 0) return -1;
  const int o = num / s;
  return o < out ? o : -1;
}

// img[i] (=|+=) the sum of the column entries that read it, over `n` image elements of
// consecutive images, taps in the order of the column rows.
template <typename T>
__device__ void col2im(T* img, const T* col, rsmx_i64 n, rsmx_col_geom g, int add) {
  typedef typename rsmx_num<T>::compute C;
  const int cols = g.out[0] * g.out[1] * g.out[2];
  const int taps = g.k[0] * g.k[1] * g.k[2];
  const int plane = g.in[0] * g.in[1] * g.in[2];
  RSMX_GRID_LOOP(i, n) {
    const int z = (int)(i % plane);
    const rsmx_i64 ch = i / plane;  // image * channels + channel
    const int zw = z % g.in[2], zh = (z / g.in[2]) % g.in[1], zd = z / g.in[2] / g.in[1];
    const T* rows = col + ch * taps * (rsmx_i64)cols;
    C acc = add ? rsmx_num<T>::load(img[i]) : (C)0;
    for (int kd = 0; kd < g.k[0]; kd++) {
      const int od = conv_source(zd, kd, g.s[0], g.d[0], g.p[0], g.out[0]);
      if (od < 0) continue;
      for (int kh = 0; kh < g.k[1]; kh++) {
        const int oh = conv_source(zh, kh, g.s[1], g.d[1], g.p[1], g.out[1]);
        if (oh < 0) continue;
        for (int kw = 0; kw < g.k[2]; kw++) {
          const int ow = conv_source(zw, kw, g.s[2], g.d[2], g.p[2], g.out[2]);
          if (ow < 0) continue;
          const int tap = (kd * g.k[1] + kh) * g.k[2] + kw;
          const int j = (od * g.out[1] + oh) * g.out[2] + ow;
          acc = conv_round<T>(acc + rsmx_num<T>::load(rows[(rsmx_i64)tap * cols + j]));
        }
      }
    }
    img[i] = rsmx_num<T>::store(acc);
  }
}

// y[i] += bias[channel of i], for `n` elements of (image, channel, plane) layout.
template <typename T>
__device__ void bias_add(T* y, const T* bias, rsmx_i64 n, rsmx_i64 plane, rsmx_i64 channels) {
  RSMX_GRID_LOOP(i, n) {
    const T b = bias[(i / plane) % channels];
    y[i] = rsmx_num<T>::store(rsmx_num<T>::load(y[i]) + rsmx_num<T>::load(b));
  }
}

// db[c] (=|+=) the sum of dy over every image's plane of channel c. One block per channel
// (blocks loop over channels); each thread sums a fixed strided share, then a tree over
// shared memory adds the shares: the result depends only on the block size. blockDim.x
// must be a power of two of at most RSMX_CONV_MAX_BLOCK.
template <typename T>
__device__ void bias_grad(T* db, const T* dy, rsmx_i64 images, rsmx_i64 channels,
                          rsmx_i64 plane, int add) {
  typedef typename rsmx_num<T>::compute C;
  __shared__ C share[RSMX_CONV_MAX_BLOCK];
  const unsigned t = threadIdx.x;
  const rsmx_i64 per_channel = images * plane;
  for (rsmx_i64 c = blockIdx.x; c < channels; c += gridDim.x) {
    C acc = (C)0;
    for (rsmx_i64 e = t; e < per_channel; e += blockDim.x) {
      acc += rsmx_num<T>::load(dy[((e / plane) * channels + c) * plane + e % plane]);
    }
    share[t] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (t < s) share[t] += share[t + s];
      __syncthreads();
    }
    if (t == 0) {
      C v = share[0];
      db[c] = rsmx_num<T>::store(add ? rsmx_num<T>::load(db[c]) + v : v);
    }
    __syncthreads();
  }
}

// out[i] (=|+=) the sum of parts[n * len + i] over `images` images, in image order: the
// weight gradient from per-image products.
template <typename T>
__device__ void sum_images(T* out, const T* parts, rsmx_i64 len, rsmx_i64 images, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, len) {
    C acc = add ? rsmx_num<T>::load(out[i]) : (C)0;
    for (rsmx_i64 n = 0; n < images; n++) acc += rsmx_num<T>::load(parts[n * len + i]);
    out[i] = rsmx_num<T>::store(acc);
  }
}

#define RSMX_IM2COL(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(T* col, const T* img, rsmx_i64 n,         \
                                               rsmx_col_geom g) {                        \
    kernel<T>(col, img, n, g);                                                           \
  }
#define RSMX_COL2IM(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(T* img, const T* col, rsmx_i64 n,         \
                                               rsmx_col_geom g, int add) {               \
    kernel<T>(img, col, n, g, add);                                                      \
  }
#define RSMX_BIAS_ADD(kernel, T, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(T* y, const T* bias, rsmx_i64 n,          \
                                               rsmx_i64 plane, rsmx_i64 channels) {      \
    kernel<T>(y, bias, n, plane, channels);                                              \
  }
#define RSMX_BIAS_GRAD(kernel, T, suffix)                                                \
  extern "C" __global__ void kernel##_##suffix(T* db, const T* dy, rsmx_i64 images,      \
                                               rsmx_i64 channels, rsmx_i64 plane,        \
                                               int add) {                                \
    kernel<T>(db, dy, images, channels, plane, add);                                     \
  }

#define RSMX_SUM_IMAGES(kernel, T, suffix)                                               \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* parts, rsmx_i64 len,     \
                                               rsmx_i64 images, int add) {               \
    kernel<T>(out, parts, len, images, add);                                             \
  }

RSMX_DTYPE_FLOAT(RSMX_IM2COL, im2col)
RSMX_DTYPE_FLOAT(RSMX_COL2IM, col2im)
RSMX_DTYPE_FLOAT(RSMX_BIAS_ADD, bias_add)
RSMX_DTYPE_FLOAT(RSMX_BIAS_GRAD, bias_grad)
RSMX_DTYPE_FLOAT(RSMX_SUM_IMAGES, sum_images)
