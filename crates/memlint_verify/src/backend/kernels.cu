// Kernels of the reference training loops, compiled once per run with NVRTC.
//
// fp16 values are handled as raw 16-bit words converted with PTX `cvt` instructions, so that the
// source needs no header (NVRTC would otherwise need the toolkit's cuda_fp16.h on the include path,
// which a machine with only the driver and NVRTC does not have). Arithmetic is done in f32, as
// PyTorch's elementwise kernels do for half.

typedef unsigned short half_t;
// NVRTC without headers has no size_t: sizes and indices are 64-bit, passed as u64 from Rust.
typedef unsigned long long u64_t;

__device__ __forceinline__ float h2f(half_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ half_t f2h(float f) { half_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }

__device__ __forceinline__ float ld_f32(const float* p, u64_t i) { return p[i]; }
__device__ __forceinline__ float ld_f16(const half_t* p, u64_t i) { return h2f(p[i]); }
__device__ __forceinline__ void st_f32(float* p, u64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st_f16(half_t* p, u64_t i, float v) { p[i] = f2h(v); }

#define GRID_STRIDE(n) for (u64_t i = blockIdx.x * (u64_t)blockDim.x + threadIdx.x; i < (n); i += (u64_t)blockDim.x * gridDim.x)

#define DEFINE_KERNELS(T, S)                                                                          \
extern "C" __global__ void fill_##S(T* y, float v, u64_t n) { GRID_STRIDE(n) st_##S(y, i, v); }      \
extern "C" __global__ void relu_fwd_##S(const T* x, T* y, u64_t n) {                                 \
    GRID_STRIDE(n) { float v = ld_##S(x, i); st_##S(y, i, v > 0.f ? v : 0.f); } }                     \
extern "C" __global__ void relu_bwd_##S(const T* gy, const T* y, T* gx, u64_t n) {                   \
    GRID_STRIDE(n) st_##S(gx, i, ld_##S(y, i) > 0.f ? ld_##S(gy, i) : 0.f); }                         \
extern "C" __global__ void bias_add_##S(T* y, const T* b, u64_t rows, u64_t cols) {                 \
    GRID_STRIDE(rows * cols) st_##S(y, i, ld_##S(y, i) + ld_##S(b, i % cols)); }                       \
extern "C" __global__ void axpy_##S(T* y, const T* x, float alpha, u64_t n) {                        \
    GRID_STRIDE(n) st_##S(y, i, ld_##S(y, i) + alpha * ld_##S(x, i)); }                                \
extern "C" __global__ void add_##S(const T* a, const T* b, T* y, u64_t n) {                          \
    GRID_STRIDE(n) st_##S(y, i, ld_##S(a, i) + ld_##S(b, i)); }                                        \
/* One thread per column: consecutive threads read consecutive addresses of a row. */                \
extern "C" __global__ void col_sum_##S(const T* x, T* out, u64_t rows, u64_t cols) {                \
    u64_t c = blockIdx.x * (u64_t)blockDim.x + threadIdx.x;                                         \
    if (c >= cols) return;                                                                            \
    float acc = 0.f;                                                                                  \
    for (u64_t r = 0; r < rows; ++r) acc += ld_##S(x, r * cols + c);                                 \
    st_##S(out, c, acc); }                                                                            \
extern "C" __global__ void count_zeros_##S(const T* x, u64_t n, unsigned long long* counter) {       \
    unsigned long long local = 0;                                                                     \
    GRID_STRIDE(n) local += (ld_##S(x, i) == 0.f);                                                    \
    if (local) atomicAdd(counter, local); }                                                           \
/* One block, rows looped by its threads; the mean is reduced in shared memory. */                   \
extern "C" __global__ void ce_fwd_##S(const T* logits, const long long* targets, T* logsm, T* loss,   \
                                      T* total_weight, u64_t rows, u64_t classes) {                 \
    __shared__ float partial[256];                                                                    \
    float acc = 0.f;                                                                                  \
    for (u64_t r = threadIdx.x; r < rows; r += blockDim.x) {                                         \
        float m = __int_as_float((int)0xff800000u);                                                                          \
        for (u64_t c = 0; c < classes; ++c) m = fmaxf(m, ld_##S(logits, r * classes + c));           \
        float s = 0.f;                                                                                \
        for (u64_t c = 0; c < classes; ++c) s += expf(ld_##S(logits, r * classes + c) - m);          \
        float lse = m + logf(s);                                                                      \
        for (u64_t c = 0; c < classes; ++c)                                                          \
            st_##S(logsm, r * classes + c, ld_##S(logits, r * classes + c) - lse);                    \
        acc -= ld_##S(logits, r * classes + (u64_t)targets[r]) - lse;                                \
    }                                                                                                 \
    partial[threadIdx.x] = acc;                                                                       \
    __syncthreads();                                                                                  \
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {                                               \
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];                        \
        __syncthreads();                                                                              \
    }                                                                                                 \
    if (threadIdx.x == 0) { st_##S(loss, 0, partial[0] / (float)rows); st_##S(total_weight, 0, (float)rows); } } \
extern "C" __global__ void ce_bwd_##S(const T* logsm, const long long* targets, const T* grad_loss,    \
                                      T* dlogits, u64_t rows, u64_t classes) {                      \
    float g = ld_##S(grad_loss, 0) / (float)rows;                                                     \
    GRID_STRIDE(rows * classes) {                                                                     \
        u64_t r = i / classes, c = i % classes;                                                      \
        float p = expf(ld_##S(logsm, i));                                                             \
        st_##S(dlogits, i, (p - (targets[r] == (long long)c ? 1.f : 0.f)) * g);                       \
    } }                                                                                               \
extern "C" __global__ void argmax_rows_##S(const T* x, long long* out, u64_t rows, u64_t cols) {    \
    GRID_STRIDE(rows) {                                                                               \
        u64_t best = 0; float bv = ld_##S(x, i * cols);                                               \
        for (u64_t c = 1; c < cols; ++c) { float v = ld_##S(x, i * cols + c); if (v > bv) { bv = v; best = c; } } \
        out[i] = (long long)best; } }                                                                 \
extern "C" __global__ void sq_diff_##S(const T* a, const T* b, T* y, u64_t n) {                      \
    GRID_STRIDE(n) { float d = ld_##S(a, i) - ld_##S(b, i); st_##S(y, i, d * d); } }                  \
/* One block: the mean of all elements, reduced in shared memory. */                                  \
extern "C" __global__ void mean_all_##S(const T* x, u64_t n, T* out) {                               \
    __shared__ float partial[256];                                                                    \
    float acc = 0.f;                                                                                  \
    for (u64_t i = threadIdx.x; i < n; i += blockDim.x) acc += ld_##S(x, i);                          \
    partial[threadIdx.x] = acc;                                                                       \
    __syncthreads();                                                                                  \
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {                                               \
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];                        \
        __syncthreads();                                                                              \
    }                                                                                                 \
    if (threadIdx.x == 0) st_##S(out, 0, partial[0] / (float)n); }                                   \
extern "C" __global__ void mse_bwd_##S(const T* a, const T* b, const T* g, T* y, u64_t n, float norm) { \
    float gv = ld_##S(g, 0);                                                                          \
    GRID_STRIDE(n) st_##S(y, i, norm * (ld_##S(a, i) - ld_##S(b, i)) * gv); }

// `a == b` for int64 tensors, into a bool (byte) tensor.
extern "C" __global__ void eq_i64(const long long* a, const long long* b, unsigned char* y, u64_t n) {
    GRID_STRIDE(n) y[i] = a[i] == b[i];
}
// `x.sum()` of a bool tensor into an int64 scalar (one block).
extern "C" __global__ void sum_bool(const unsigned char* x, u64_t n, long long* out) {
    __shared__ long long partial[256];
    long long acc = 0;
    for (u64_t i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = partial[0];
}

// Deterministic initialisation from a counter-based hash (splitmix64), so that a model of any size
// is initialised on the device without a host copy.
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ float unit_uniform(unsigned long long seed, u64_t i, unsigned k) {
    // 24 random bits -> (0, 1]
    return ((float)(mix64(seed * 0x100000001B3ull + 2 * i + k) >> 40) + 1.f) * (1.f / 16777216.f);
}
#define DEFINE_INIT(T, S)                                                                             \
extern "C" __global__ void init_uniform_##S(T* y, u64_t n, unsigned long long seed, float bound) {   \
    GRID_STRIDE(n) st_##S(y, i, (2.f * unit_uniform(seed, i, 0) - 1.f) * bound); }                    \
/* Box-Muller: standard normal values, as torch.randn. */                                             \
extern "C" __global__ void init_normal_##S(T* y, u64_t n, unsigned long long seed) {                 \
    GRID_STRIDE(n) {                                                                                  \
        float u1 = unit_uniform(seed, i, 0), u2 = unit_uniform(seed, i, 1);                           \
        st_##S(y, i, sqrtf(-2.f * logf(u1)) * cospif(2.f * u2)); } }
DEFINE_INIT(float, f32)
DEFINE_INIT(half_t, f16)

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(half_t, f16)

#define DEFINE_CAST(TI, SI, TO, SO)                                                                   \
extern "C" __global__ void cast_##SI##_##SO(const TI* x, TO* y, u64_t n, float scale) {              \
    GRID_STRIDE(n) st_##SO(y, i, ld_##SI(x, i) * scale); }

DEFINE_CAST(float, f32, half_t, f16)
DEFINE_CAST(half_t, f16, float, f32)
DEFINE_CAST(float, f32, float, f32)
DEFINE_CAST(half_t, f16, half_t, f16)

// GradScaler's `_amp_foreach_non_finite_check_and_unscale_` for one fp32 tensor.
extern "C" __global__ void unscale_check_f32(float* g, u64_t n, float inv_scale, float* found_inf) {
    GRID_STRIDE(n) {
        float v = g[i];
        if (!isfinite(v)) *found_inf = 1.f;
        g[i] = v * inv_scale;
    }
}
