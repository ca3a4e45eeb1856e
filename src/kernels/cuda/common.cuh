// rsmx's common CUDA header: dtype aliases, a header-free half type, grid-stride loops
// and the instantiation macros. Compiled by NVRTC and by the host emulation build, so it
// includes no CUDA SDK header.
#pragma once

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

typedef signed char rsmx_i8;
typedef unsigned char rsmx_u8;
typedef int rsmx_i32;
typedef long long rsmx_i64;

// float16 storage; arithmetic converts to float.
struct rsmx_half {
  unsigned short bits;
};

__device__ __forceinline__ float rsmx_half_to_float(rsmx_half h) {
#ifdef __CUDACC_RTC__
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
#else
  unsigned int sign = (h.bits & 0x8000u) << 16, exp = (h.bits >> 10) & 0x1f, man = h.bits & 0x3ffu;
  unsigned int out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    out = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    out = sign;
  } else {
    int e = -1;
    do { man <<= 1; e++; } while ((man & 0x400u) == 0);
    out = sign | ((unsigned int)(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  return __int_as_float((int)out);
#endif
}

__device__ __forceinline__ rsmx_half rsmx_float_to_half(float f) {
  rsmx_half h;
#ifdef __CUDACC_RTC__
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
  // Round to nearest even, as cvt.rn does.
  unsigned int x = (unsigned int)__float_as_int(f);
  unsigned int sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) {
    h.bits = (unsigned short)(sign | 0x7e00u);  // NaN
  } else if (absx >= 0x477ff000u) {
    h.bits = (unsigned short)(sign | 0x7c00u);  // rounds past 65504: infinity
  } else if (absx < 0x33000001u) {
    h.bits = (unsigned short)sign;  // at most 2^-25: zero
  } else {
    int e = (int)(absx >> 23) - 127;
    unsigned int man = (absx & 0x7fffffu) | 0x800000u;
    // A normal half keeps 11 bits of `man`; a subnormal one counts units of 2^-24.
    unsigned int shift = e >= -14 ? 13u : (unsigned int)(-e - 1);
    unsigned int kept = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    unsigned int r = e >= -14 ? ((unsigned int)(e + 15) << 10) + kept - 0x400u : kept;
    if (rest > mid || (rest == mid && (r & 1u))) r++;  // a carry moves into the exponent
    h.bits = (unsigned short)(sign | r);
  }
#endif
  return h;
}

// Conversions between a storage type and the type arithmetic runs in.
template <typename T> struct rsmx_num {
  typedef T compute;
  __device__ __forceinline__ static T load(T v) { return v; }
  __device__ __forceinline__ static T store(T v) { return v; }
};
template <> struct rsmx_num<rsmx_half> {
  typedef float compute;
  __device__ __forceinline__ static float load(rsmx_half v) { return rsmx_half_to_float(v); }
  __device__ __forceinline__ static rsmx_half store(float v) { return rsmx_float_to_half(v); }
};

// The first index of this thread and the stride of a grid-stride loop over `n` items.
#define RSMX_GRID_LOOP(i, n)                                                         \
  for (rsmx_i64 i = (rsmx_i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);        \
       i += (rsmx_i64)blockDim.x * gridDim.x)

// A counter-based random stream: SplitMix64's output for counter `i` of stream `seed`.
__device__ __forceinline__ unsigned long long rsmx_hash(unsigned long long seed, rsmx_i64 i) {
  unsigned long long z = seed + ((unsigned long long)i + 1ull) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// `extern "C"` instantiations `<name>_<suffix>` of a template kernel, one per dtype, so
// names are unmangled and the same for NVRTC and host builds.
#define RSMX_DTYPE_ALL(X, kernel) \
  X(kernel, float, f32)           \
  X(kernel, double, f64)          \
  X(kernel, rsmx_half, f16)       \
  X(kernel, rsmx_u8, u8)          \
  X(kernel, rsmx_i8, i8)          \
  X(kernel, rsmx_i32, i32)        \
  X(kernel, rsmx_i64, i64)

// The same for the numeric dtypes (all but bool, which rsmx stores apart).
#define RSMX_DTYPE_NUM(X, kernel) RSMX_DTYPE_ALL(X, kernel)

// The same for the floating-point dtypes only.
#define RSMX_DTYPE_FLOAT(X, kernel) \
  X(kernel, float, f32)             \
  X(kernel, double, f64)            \
  X(kernel, rsmx_half, f16)

// The same for float32 and float64 only (kernels whose float16 form rsmx lacks).
#define RSMX_DTYPE_REAL(X, kernel) \
  X(kernel, float, f32)            \
  X(kernel, double, f64)

// `v` rounded to float16 once (to nearest even), as a direct conversion from double
// rounds: first to float rounding to odd, which keeps enough bits for the second rounding
// to give the same result.
__device__ __forceinline__ rsmx_half rsmx_double_to_half(double v) {
  float f = (float)v;
  double back = (double)f;
  if (back != v && v == v) {
    int bits = __float_as_int(f);
    if (v > 0 ? back > v : back < v) bits -= 1;  // one step toward zero: the truncation
    f = __int_as_float(bits | 1);
  }
  return rsmx_float_to_half(f);
}
