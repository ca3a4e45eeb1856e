// Probe kernels for the first run on a real GPU: compiled on a CPU machine by several
// NVRTC versions, then loaded and launched with nothing but the driver API, to learn
// which CUBIN and PTX a driver accepts. No SDK headers, so any NVRTC compiles it.

// y[i] = a * x[i] + y[i], grid-stride.
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// out[blockIdx.x] = the sum of the block's slice of x, a tree reduction in dynamic shared
// memory (blockDim.x floats, blockDim.x a power of two).
extern "C" __global__ void block_sum(const float* x, float* out, int n) {
    extern __shared__ float partial[];
    const unsigned t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    partial[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            partial[t] += partial[t + s];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[blockIdx.x] = partial[0];
    }
}
