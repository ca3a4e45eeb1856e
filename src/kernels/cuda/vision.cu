// The spatial transformer's grid generator and bilinear sampler, and region-of-interest
// max pooling, each with its backward.
#include "common.cuh"

typedef long long rsmx_ll;

// The normalised coordinate of pixel `i` of `n`, as MXNet computes it: `-1 + i * step`
// in the compute type, with `step = 2 / (n - 1)` rounded to it.
template <typename C>
__device__ __forceinline__ C grid_coord(rsmx_i64 i, rsmx_i64 n) {
  C step = (C)(2.0 / ((double)n - 1.0));
  return (C)i * step - (C)1;
}

// `out (=|+=) v` in T.
template <typename T, typename C>
__device__ __forceinline__ void grid_put(T* out, C v, int add) {
  if (add) v += rsmx_num<T>::load(*out);
  *out = rsmx_num<T>::store(v);
}

// Affine grids: `rows` = batch * 2 planes of h x w; plane r applies row r of the 2x3
// matrices in `data` to the normalised (x, y, 1) of each pixel.
template <typename T>
__device__ void grid_affine(T* out, const T* data, rsmx_i64 rows, rsmx_i64 h, rsmx_i64 w,
                            int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, rows * h * w) {
    rsmx_i64 row = i / (h * w), p = i % (h * w);
    const T* a = data + row * 3;
    C v = rsmx_num<T>::load(a[0]) * grid_coord<C>(p % w, w) +
          rsmx_num<T>::load(a[1]) * grid_coord<C>(p / w, h) + rsmx_num<T>::load(a[2]);
    grid_put<T, C>(out + i, v, add);
  }
}

// Warp grids: the flow plus each pixel's own position, over half the extent, minus one;
// even planes are x, odd ones y.
template <typename T>
__device__ void grid_warp(T* out, const T* data, rsmx_i64 rows, rsmx_i64 h, rsmx_i64 w, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, rows * h * w) {
    rsmx_i64 row = i / (h * w), p = i % (h * w);
    int is_x = row % 2 == 0;
    C half = (C)(((double)(is_x ? w : h) - 1.0) / 2.0);
    C pos = (C)(is_x ? p % w : p / w);
    grid_put<T, C>(out + i, (rsmx_num<T>::load(data[i]) + pos) / half - (C)1, add);
  }
}

// The affine backward: coefficient k of matrix row r is the sum over the plane's pixels of
// the gradient times x, y or 1; a thread per coefficient.
template <typename T>
__device__ void grid_affine_backward(T* gd, const T* og, rsmx_i64 rows, rsmx_i64 h, rsmx_i64 w,
                                     int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, rows * 3) {
    rsmx_i64 row = i / 3;
    int k = (int)(i % 3);
    const T* g = og + row * h * w;
    C sum = 0;
    for (rsmx_i64 p = 0; p < h * w; ++p) {
      C basis = k == 0 ? grid_coord<C>(p % w, w) : k == 1 ? grid_coord<C>(p / w, h) : (C)1;
      sum += rsmx_num<T>::load(g[p]) * basis;
    }
    grid_put<T, C>(gd + i, sum, add);
  }
}

// The warp backward: the gradient over half the extent.
template <typename T>
__device__ void grid_warp_backward(T* gd, const T* og, rsmx_i64 rows, rsmx_i64 h, rsmx_i64 w,
                                   int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, rows * h * w) {
    int is_x = (i / (h * w)) % 2 == 0;
    C half = (C)(((double)(is_x ? w : h) - 1.0) / 2.0);
    grid_put<T, C>(gd + i, rsmx_num<T>::load(og[i]) / half, add);
  }
}

// A grid position in an ih x iw image: its top-left pixel and the weights of the top row
// and the left column, as MXNet computes them (`(g + 1) * (n - 1) / 2`).
template <typename C>
struct SamplePoint {
  rsmx_ll y0, x0;
  C wy, wx;
  __device__ __forceinline__ SamplePoint(C gx, C gy, rsmx_i64 ih, rsmx_i64 iw) {
    C y = (gy + (C)1) * (C)(ih - 1) / (C)2;
    C x = (gx + (C)1) * (C)(iw - 1) / (C)2;
    C fy = floor(y), fx = floor(x);
    // Far-off positions are clamped so the corner arithmetic cannot overflow.
    C lim = (C)1e15;
    y0 = (rsmx_ll)fmin(fmax(fy, -lim), lim);
    x0 = (rsmx_ll)fmin(fmax(fx, -lim), lim);
    wy = (C)1 - (y - fy);
    wx = (C)1 - (x - fx);
  }
  // Offset of corner (dy, dx) in the image, or -1 outside it.
  __device__ __forceinline__ rsmx_i64 at(int dy, int dx, rsmx_i64 ih, rsmx_i64 iw) const {
    rsmx_ll y = y0 + dy, x = x0 + dx;
    return (y >= 0 && x >= 0 && y < ih && x < iw) ? y * iw + x : -1;
  }
};

// Bilinear sampling: a thread per output element; zeros outside the data.
template <typename T>
__device__ void bilinear_forward(T* out, const T* data, const T* grid, rsmx_i64 n, rsmx_i64 c,
                                 rsmx_i64 ih, rsmx_i64 iw, rsmx_i64 oh, rsmx_i64 ow, int add) {
  typedef typename rsmx_num<T>::compute C;
  rsmx_i64 pixels = oh * ow;
  RSMX_GRID_LOOP(i, n * c * pixels) {
    rsmx_i64 row = i / pixels, p = i % pixels, b = row / c;
    const T* g = grid + b * 2 * pixels + p;
    SamplePoint<C> pt(rsmx_num<T>::load(g[0]), rsmx_num<T>::load(g[pixels]), ih, iw);
    const T* img = data + row * ih * iw;
    C v = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      int dy = k >> 1, dx = k & 1;
      rsmx_i64 o = pt.at(dy, dx, ih, iw);
      if (o >= 0) {
        C wgt = (dy ? (C)1 - pt.wy : pt.wy) * (dx ? (C)1 - pt.wx : pt.wx);
        v += rsmx_num<T>::load(img[o]) * wgt;
      }
    }
    grid_put<T, C>(out + i, v, add);
  }
}

// The sampler's backward: a thread per output pixel, over the channels. The data's
// gradient is added atomically into `gacc` (compute type, zeroed; null when not wanted);
// the grid's gradient goes to `ggrid` (null when not wanted), written or added.
template <typename T>
__device__ void bilinear_backward(typename rsmx_num<T>::compute* gacc, T* ggrid, const T* og,
                                  const T* data, const T* grid, rsmx_i64 n, rsmx_i64 c,
                                  rsmx_i64 ih, rsmx_i64 iw, rsmx_i64 oh, rsmx_i64 ow,
                                  int add_grid) {
  typedef typename rsmx_num<T>::compute C;
  rsmx_i64 pixels = oh * ow;
  RSMX_GRID_LOOP(i, n * pixels) {
    rsmx_i64 b = i / pixels, p = i % pixels;
    const T* g = grid + b * 2 * pixels + p;
    SamplePoint<C> pt(rsmx_num<T>::load(g[0]), rsmx_num<T>::load(g[pixels]), ih, iw);
    C gy = 0, gx = 0;
    for (rsmx_i64 ch = 0; ch < c; ++ch) {
      rsmx_i64 row = b * c + ch;
      C o = rsmx_num<T>::load(og[row * pixels + p]);
      const T* img = data + row * ih * iw;
      C v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        // Recomputed per channel: cheaper than holding four offsets in registers.
        rsmx_i64 at = pt.at(k >> 1, k & 1, ih, iw);
        v[k] = at >= 0 ? rsmx_num<T>::load(img[at]) : (C)0;
        if (gacc && at >= 0) {
          C wgt = ((k >> 1) ? (C)1 - pt.wy : pt.wy) * ((k & 1) ? (C)1 - pt.wx : pt.wx);
          atomicAdd(gacc + row * ih * iw + at, o * wgt);
        }
      }
      C cross = v[0] - v[1] - v[2] + v[3];
      gy -= o * (v[1] - v[3] + cross * pt.wx);
      gx -= o * (v[2] - v[3] + cross * pt.wy);
    }
    if (ggrid) {
      T* gg = ggrid + b * 2 * pixels + p;
      grid_put<T, C>(gg, gx * (C)(iw - 1) / (C)2, add_grid);
      grid_put<T, C>(gg + pixels, gy * (C)(ih - 1) / (C)2, add_grid);
    }
  }
}

// Region-of-interest max pooling: a thread per output element (region, channel, bin). The
// region's corners are scaled and rounded half away from zero, the bins are split in the
// compute type (single precision for float16 and float32, as MXNet's), and the maximum's
// flat index into the data goes to `index` (-1 for an empty bin or a bad batch index,
// whose output is 0). `out` or `index` may be null when not wanted.
template <typename T>
__device__ void roi_pool(T* out, rsmx_i64* index, const T* data, const T* rois, rsmx_i64 total,
                         rsmx_i64 batch, rsmx_i64 channels, rsmx_i64 h, rsmx_i64 w, rsmx_i64 ph,
                         rsmx_i64 pw, float scale, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, total) {
    rsmx_i64 bin = i % (ph * pw), ch = (i / (ph * pw)) % channels, r = i / (ph * pw * channels);
    const T* roi = rois + r * 5;
    C s = (C)scale;
    rsmx_ll x1 = (rsmx_ll)round(rsmx_num<T>::load(roi[1]) * s);
    rsmx_ll y1 = (rsmx_ll)round(rsmx_num<T>::load(roi[2]) * s);
    rsmx_ll x2 = (rsmx_ll)round(rsmx_num<T>::load(roi[3]) * s);
    rsmx_ll y2 = (rsmx_ll)round(rsmx_num<T>::load(roi[4]) * s);
    rsmx_ll img = (rsmx_ll)rsmx_num<T>::load(roi[0]);
    rsmx_ll rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1;
    rsmx_ll rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
    C bh = (C)rh / (C)ph, bw = (C)rw / (C)pw;
    rsmx_i64 by = bin / pw, bx = bin % pw;
    rsmx_ll h0 = (rsmx_ll)floor((C)by * bh) + y1, h1 = (rsmx_ll)ceil((C)(by + 1) * bh) + y1;
    rsmx_ll w0 = (rsmx_ll)floor((C)bx * bw) + x1, w1 = (rsmx_ll)ceil((C)(bx + 1) * bw) + x1;
    h0 = h0 < 0 ? 0 : h0 > h ? h : h0;
    h1 = h1 < 0 ? 0 : h1 > h ? h : h1;
    w0 = w0 < 0 ? 0 : w0 > w ? w : w0;
    w1 = w1 < 0 ? 0 : w1 > w ? w : w1;
    C best = 0;
    rsmx_i64 at = -1;
    if (img >= 0 && img < batch && h1 > h0 && w1 > w0) {
      best = (C)-3.402823466e+38f;
      rsmx_i64 base = (img * channels + ch) * h * w;
      for (rsmx_ll y = h0; y < h1; ++y) {
        for (rsmx_ll x = w0; x < w1; ++x) {
          C v = rsmx_num<T>::load(data[base + y * w + x]);
          if (v > best) {
            best = v;
            at = base + y * w + x;
          }
        }
      }
    }
    if (out) grid_put<T, C>(out + i, best, add);
    if (index) index[i] = at;
  }
}

// The pooling's backward: each bin's gradient added atomically at its maximum, into `gacc`
// (compute type, zeroed).
template <typename T>
__device__ void roi_pool_backward(typename rsmx_num<T>::compute* gacc, const T* og,
                                  const rsmx_i64* index, rsmx_i64 total) {
  RSMX_GRID_LOOP(i, total) {
    if (index[i] >= 0) atomicAdd(gacc + index[i], rsmx_num<T>::load(og[i]));
  }
}

#define RSMX_GRID(kernel, T, suffix)                                                           \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 rows, rsmx_i64 h, \
                                               rsmx_i64 w, int add) {                         \
    kernel<T>(out, in, rows, h, w, add);                                                       \
  }
#define RSMX_BILINEAR_FORWARD(kernel, T, suffix)                                          \
  extern "C" __global__ void kernel##_##suffix(                                           \
      T* out, const T* data, const T* grid, rsmx_i64 n, rsmx_i64 c, rsmx_i64 ih,          \
      rsmx_i64 iw, rsmx_i64 oh, rsmx_i64 ow, int add) {                                   \
    kernel<T>(out, data, grid, n, c, ih, iw, oh, ow, add);                                \
  }
#define RSMX_BILINEAR_BACKWARD(kernel, T, suffix)                                         \
  extern "C" __global__ void kernel##_##suffix(                                           \
      rsmx_num<T>::compute* gacc, T* ggrid, const T* og, const T* data, const T* grid,    \
      rsmx_i64 n, rsmx_i64 c, rsmx_i64 ih, rsmx_i64 iw, rsmx_i64 oh, rsmx_i64 ow,         \
      int add_grid) {                                                                     \
    kernel<T>(gacc, ggrid, og, data, grid, n, c, ih, iw, oh, ow, add_grid);               \
  }
#define RSMX_ROI_POOL(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(                                           \
      T* out, rsmx_i64* index, const T* data, const T* rois, rsmx_i64 total,              \
      rsmx_i64 batch, rsmx_i64 channels, rsmx_i64 h, rsmx_i64 w, rsmx_i64 ph,             \
      rsmx_i64 pw, float scale, int add) {                                                \
    kernel<T>(out, index, data, rois, total, batch, channels, h, w, ph, pw, scale, add);  \
  }
#define RSMX_ROI_POOL_BACKWARD(kernel, T, suffix)                                         \
  extern "C" __global__ void kernel##_##suffix(rsmx_num<T>::compute* gacc, const T* og,   \
                                               const rsmx_i64* index, rsmx_i64 total) {   \
    kernel<T>(gacc, og, index, total);                                                    \
  }

RSMX_DTYPE_FLOAT(RSMX_GRID, grid_affine)
RSMX_DTYPE_FLOAT(RSMX_GRID, grid_warp)
RSMX_DTYPE_FLOAT(RSMX_GRID, grid_affine_backward)
RSMX_DTYPE_FLOAT(RSMX_GRID, grid_warp_backward)
RSMX_DTYPE_FLOAT(RSMX_BILINEAR_FORWARD, bilinear_forward)
RSMX_DTYPE_FLOAT(RSMX_BILINEAR_BACKWARD, bilinear_backward)
RSMX_DTYPE_FLOAT(RSMX_ROI_POOL, roi_pool)
RSMX_DTYPE_FLOAT(RSMX_ROI_POOL_BACKWARD, roi_pool_backward)
