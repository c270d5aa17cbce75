// mmsched_cuda.cu - the CUDA backend of mmsched.
//
// Compile with nvcc and link together with a C file that defines MMSCHED_IMPLEMENTATION and
// MMS_CUDA (see `make cuda`; CUDA_ARCHS chooses the architectures). It implements the public
// backend interface of mmsched.h, nothing more: a device buffer type per GPU (cudaMalloc, never
// managed memory), a pinned host buffer type, and a backend per GPU with its own stream and cuBLAS
// handle. Several GPUs are several backends; the scheduler splits graphs between them and the CPU.
//
// Layout of this file:
//   1. errors       every CUDA and cuBLAS call goes through CU_TRY / CUBLAS_TRY: a failure becomes
//                   a status whose message names the call and the CUDA error string
//   2. elements     a tensor as kernels see it (cu_tensor) and per-element loads and stores for
//                   every type, the block types included
//   3. element ops  one functor per op (binary, unary, copies, layout ops, get_rows, im2col, rope)
//   4. blocks       a thread of a block (cu_thread: indices, shared memory, barrier, warp shuffle),
//                   the cuBLAS call as data (cu_gemm)
//   5. row ops      norms, sum_rows, argmax and softmax: a block per row
//   6. attention    flash attention: a block per 16 query rows of one head, K/V tiles in shared memory
//   7. mul_mat      cuBLAS (F32, and F16/BF16 on tensor cores; block-type weights dequantized to F16
//                   first) and a warp-per-row GEMV for block-type weights at decode sizes; then
//                   cu_compute_node, which runs any node through an executor, and the GPU's executor
//   8. buffers      device and pinned host buffer types
//   9. backend      supports_op, graph compute on the stream, async copies, events, entry points
// Everything a kernel computes is a __host__ __device__ functor, and cu_compute_node takes the
// executor as a template parameter: tests/test_cuda_kernels.cu runs every op case through the same
// code on the host (a thread per CUDA thread, a host model of the cuBLAS call) against the CPU
// backend, so the kernels' logic is tested on machines without a GPU.
#define MMS_CUDA
#include "mmsched.h"
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <math.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#define HD __host__ __device__
// The per-device tables hold CU_MAX_DEVICES GPUs; a device past them is refused by name
// (cu_check_device), never dropped silently. -DCU_MAX_DEVICES=N builds for more.
#ifndef CU_MAX_DEVICES
#define CU_MAX_DEVICES 16
#endif

// Plain cudaMemcpy/cudaMemset on a buffer must wait for the kernels queued on the backends'
// streams: that is the legacy default stream's rule, which per-thread default streams drop.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "mmsched_cuda.cu relies on the legacy default stream; build it without --default-stream per-thread"
#endif

// -- 1. errors ------------------------------------------------------------------------------------

// The runtime keeps the last error until it is read: read it here, so that the next launch's
// check (CU_LAUNCHED) does not report this failure again as its own.
static enum mms_status cu_fail(cudaError_t err, const char *call, int line) {
    cudaGetLastError();
    return mms_set_error(err == cudaErrorMemoryAllocation ? MMS_ERR_OOM : MMS_ERR_BACKEND,
                         "CUDA: %s failed: %s (%s) [mmsched_cuda.cu:%d]", call, cudaGetErrorString(err), cudaGetErrorName(err), line);
}
static enum mms_status cublas_fail(cublasStatus_t st, const char *call, int line) {
    return mms_set_error(st == CUBLAS_STATUS_ALLOC_FAILED ? MMS_ERR_OOM : MMS_ERR_BACKEND,
                         "cuBLAS: %s failed: %s [mmsched_cuda.cu:%d]", call, cublasGetStatusString(st), line);
}
#define CU_TRY(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return cu_fail(e_, #call, __LINE__); } while (0)
#define CUBLAS_TRY(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) return cublas_fail(s_, #call, __LINE__); } while (0)
// After a kernel launch: a bad configuration shows up here, not at the next call.
#define CU_LAUNCHED(what) do { cudaError_t e_ = cudaGetLastError(); if (e_ != cudaSuccess) return cu_fail(e_, what, __LINE__); } while (0)

// -- 2. elements ----------------------------------------------------------------------------------

// A tensor as a kernel sees it: device address, type, shape and byte strides.
struct cu_tensor {
    char   *data;
    int     type;
    int64_t ne[4];
    int64_t nb[4];
};

static bool cu_is_float(enum mms_type t) { return t == MMS_TYPE_F32 || t == MMS_TYPE_F16 || t == MMS_TYPE_BF16; }
static bool cu_is_plain(enum mms_type t) { return cu_is_float(t) || t == MMS_TYPE_I32; }
static bool cu_is_block(enum mms_type t) { return t == MMS_TYPE_Q8_0 || t == MMS_TYPE_Q4_0 || t == MMS_TYPE_Q4_K || t == MMS_TYPE_Q5_K || t == MMS_TYPE_Q6_K; }

static cu_tensor cu_tensor_of(const struct mms_tensor *t) {
    cu_tensor c;
    c.data = (char *)t->data;
    c.type = (int)t->type;
    for (int i = 0; i < 4; i++) { c.ne[i] = t->ne[i]; c.nb[i] = (int64_t)t->nb[i]; }
    return c;
}


// Flat index i (ne[0] fastest) to coordinates.
HD static void cu_unravel(const int64_t *ne, int64_t i, int64_t *idx) {
    idx[0] = i % ne[0]; i /= ne[0];
    idx[1] = i % ne[1]; i /= ne[1];
    idx[2] = i % ne[2];
    idx[3] = i / ne[2];
}

HD static int64_t cu_min64(int64_t a, int64_t b) { return a < b ? a : b; }

HD static char *cu_row(const cu_tensor &t, int64_t i1, int64_t i2, int64_t i3) {
    return t.data + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

HD static float cu_half_to_float(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    return mms_fp16_to_fp32(h);
#endif
}
HD static uint16_t cu_float_to_half(float f) {
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(f));
#else
    return mms_fp32_to_fp16(f);
#endif
}
HD static float cu_bf16_to_float(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __uint_as_float((unsigned)h << 16);
#else
    return mms_bf16_to_fp32(h);
#endif
}
HD static uint16_t cu_float_to_bf16(float f) {
#ifdef __CUDA_ARCH__
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
    return mms_fp32_to_bf16(f);
#endif
}
// A product rounded on its own where a result must equal the CPU's to the bit: nvcc (and the
// host emulation's build, which contracts the same way) would otherwise fuse a * b + c into one
// FMA that rounds once.
HD static float cu_mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    volatile float p = a * b;      // the host compiler cannot fuse through a volatile
    return p;
#endif
}
HD static uint16_t cu_u16(const char *p) { return (uint16_t)((const uint8_t *)p)[0] | (uint16_t)(((const uint8_t *)p)[1] << 8); }

// Bytes per block and values per block of each type (GGUF's block layouts, as in mmsched.h).
HD static int cu_type_size(int type) {
    switch (type) {
        case MMS_TYPE_F32: case MMS_TYPE_I32: return 4;
        case MMS_TYPE_F16: case MMS_TYPE_BF16: return 2;
        case MMS_TYPE_Q8_0: return 34;
        case MMS_TYPE_Q4_0: return 18;
        case MMS_TYPE_Q4_K: return 144;
        case MMS_TYPE_Q5_K: return 176;
        case MMS_TYPE_Q6_K: return 210;
        default: return 0;
    }
}
HD static int cu_blck_size(int type) {
    switch (type) {
        case MMS_TYPE_Q8_0: case MMS_TYPE_Q4_0: return 32;
        case MMS_TYPE_Q4_K: case MMS_TYPE_Q5_K: case MMS_TYPE_Q6_K: return 256;
        default: return 1;
    }
}

// Value i of a row of a block type (the float operations in the order of the CPU's dequantizers,
// so the results are the same bits).
HD static float cu_dequant(int type, const char *row, int64_t i) {
    const char *b = row + (i / cu_blck_size(type)) * cu_type_size(type);
    const int j = (int)(i % cu_blck_size(type));
    const uint8_t *u = (const uint8_t *)b;
    switch (type) {
        case MMS_TYPE_Q8_0:
            return cu_half_to_float(cu_u16(b)) * (float)(int8_t)u[2 + j];
        case MMS_TYPE_Q4_0: {
            const int q = j < 16 ? (u[2 + j] & 0x0f) : (u[2 + j - 16] >> 4);
            return (float)(q - 8) * cu_half_to_float(cu_u16(b));
        }
        case MMS_TYPE_Q4_K: case MMS_TYPE_Q5_K: {   // f16 d, f16 dmin, scales[12], Q5_K: qh[32], qs[128]
            const bool fifth = type == MMS_TYPE_Q5_K;   // value l of sub-block s: bit s of qh[l] on top
            const uint8_t *sc = u + 4, *qs = u + (fifth ? 48 : 16);
            const int sub = j / 32, l = j % 32, chunk = j / 64;
            const int q = (sub % 2 == 0 ? (qs[32 * chunk + l] & 0x0f) : (qs[32 * chunk + l] >> 4)) | (fifth ? ((u[16 + l] >> sub) & 1) << 4 : 0);
            int s, m;
            if (sub < 4) { s = sc[sub] & 63; m = sc[sub + 4] & 63; }
            else         { s = (sc[sub + 4] & 0x0f) | ((sc[sub - 4] >> 6) << 4); m = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4); }
            // Fused into one FMA by nvcc, and still the CPU's bits: d has at most 17 significant
            // bits (11 of the f16, 6 of s), so d * q (q < 32) is exact and only the subtraction rounds.
            const float d = cu_half_to_float(cu_u16(b)) * (float)s, dm = cu_half_to_float(cu_u16(b + 2)) * (float)m;
            return d * (float)q - dm;
        }
        case MMS_TYPE_Q6_K: {           // ql[128], qh[64], int8 scales[16], f16 d
            const int half = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
            const uint8_t *ql = u + 64 * half, *qh = u + 128 + 32 * half;
            const int8_t *sc = (const int8_t *)(u + 192) + 8 * half;
            int q;
            switch (quarter) {
                case 0:  q = (ql[l] & 0x0f)      | (((qh[l] >> 0) & 3) << 4); break;
                case 1:  q = (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4); break;
                case 2:  q = (ql[l] >> 4)        | (((qh[l] >> 4) & 3) << 4); break;
                default: q = (ql[l + 32] >> 4)   | (((qh[l] >> 6) & 3) << 4); break;
            }
            return cu_half_to_float(cu_u16(b + 208)) * (float)sc[l / 16 + 2 * quarter] * (float)(q - 32);
        }
        default:
            return 0.0f;
    }
}

// Element (i0, i1, i2, i3) of a float or block tensor as f32.
HD static float cu_load(const cu_tensor &t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char *row = cu_row(t, i1, i2, i3);
    switch (t.type) {
        case MMS_TYPE_F32:  return *(const float *)(row + i0 * t.nb[0]);
        case MMS_TYPE_F16:  return cu_half_to_float(*(const uint16_t *)(row + i0 * t.nb[0]));
        case MMS_TYPE_BF16: return cu_bf16_to_float(*(const uint16_t *)(row + i0 * t.nb[0]));
        case MMS_TYPE_I32:  return (float)*(const int32_t *)(row + i0 * t.nb[0]);
        default:            return cu_dequant(t.type, row, i0);
    }
}

HD static void cu_store(const cu_tensor &t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    char *p = cu_row(t, i1, i2, i3) + i0 * t.nb[0];
    switch (t.type) {
        case MMS_TYPE_F32:  *(float *)p = v; break;
        case MMS_TYPE_F16:  *(uint16_t *)p = cu_float_to_half(v); break;
        case MMS_TYPE_BF16: *(uint16_t *)p = cu_float_to_bf16(v); break;
        default: break;    // supports_op admits no other destination
    }
}

// dst element = src element: the same bits when the types agree (I32 included), else converted.
HD static void cu_move(const cu_tensor &d, const int64_t *di, const cu_tensor &s, const int64_t *si) {
    if (d.type == s.type && cu_blck_size(s.type) == 1) {
        const char *sp = cu_row(s, si[1], si[2], si[3]) + si[0] * s.nb[0];
        char *dp = cu_row(d, di[1], di[2], di[3]) + di[0] * d.nb[0];
        if (cu_type_size(s.type) == 4) *(uint32_t *)dp = *(const uint32_t *)sp;
        else                           *(uint16_t *)dp = *(const uint16_t *)sp;
        return;
    }
    cu_store(d, di[0], di[1], di[2], di[3], cu_load(s, si[0], si[1], si[2], si[3]));
}

// The first bad index a kernel met (get_rows), in mapped host memory the device writes directly.
// It carries the node's name: the kernel may have been queued by a graph computed long before the
// synchronize that reads it (or replayed from a captured CUDA graph).
struct cu_fault {
    int     set, op;               // op: the node's (GET_ROWS, or FLASH_ATTN_EXT for a shared mask row)
    int64_t value, position, limit;
    char    name[MMS_MAX_NAME];
};

HD static void cu_report(cu_fault *f, int op, const char *name, int64_t value, int64_t position, int64_t limit) {
#ifdef __CUDA_ARCH__
    if (atomicCAS(&f->set, 0, 1) != 0) return;
#else
    if (f->set) return;
    f->set = 1;
#endif
    f->op = op;
    f->value = value;
    f->position = position;
    f->limit = limit;
    for (int i = 0; i < MMS_MAX_NAME; i++) f->name[i] = name[i];
}

HD static void cu_atomic_or_shared(int *p, int v) {
#ifdef __CUDA_ARCH__
    atomicOr(p, v);
#else
    *p |= v;
#endif
}

// The status for a fault read back (the message the tests and users see).
static enum mms_status cu_fault_status(const cu_fault *f, const char *backend) {
    return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s '%.*s': %sindex %lld at position %lld is outside 0..%lld", backend,
                         mms_op_name((enum mms_op)f->op), MMS_MAX_NAME - 1, f->name, f->op == MMS_OP_FLASH_ATTN_EXT ? "mask row " : "",
                         (long long)f->value, (long long)f->position, (long long)f->limit - 1);
}

// -- 3. element ops -------------------------------------------------------------------------------
// Each functor computes element (or pair) i of its node; an executor runs it over a grid. Every one
// of them reads the inputs of element i before writing element i, so dst may share src[0]'s memory.

HD static float cu_binary_value(int op, float u, float v) {
    switch (op) {
        case MMS_OP_ADD: return u + v;
        case MMS_OP_SUB: return u - v;
        case MMS_OP_MUL: return u * v;
        default:         return u / v;
    }
}

struct cu_binary {
    cu_tensor d, a, b;
    int op;
    HD void operator()(int64_t i) const {
        int64_t x[4];
        cu_unravel(d.ne, i, x);
        const float u = cu_load(a, x[0], x[1], x[2], x[3]);
        const float v = cu_load(b, x[0] % b.ne[0], x[1] % b.ne[1], x[2] % b.ne[2], x[3] % b.ne[3]);
        cu_store(d, x[0], x[1], x[2], x[3], cu_binary_value(op, u, v));
    }
};

HD static float cu_unary_value(int op, float x, float s) {
    switch (op) {
        case MMS_OP_SCALE:     return x * s;
        case MMS_OP_SQR:       return x * x;
        case MMS_OP_SQRT:      return sqrtf(x);
        case MMS_OP_EXP:       return expf(x);
        case MMS_OP_TANH:      return tanhf(x);
        case MMS_OP_SILU:      return x / (1.0f + expf(-x));
        case MMS_OP_GELU:      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
        case MMS_OP_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
        default:               return x;
    }
}

struct cu_unary {
    cu_tensor d, a;
    int op;
    float s;
    HD void operator()(int64_t i) const {
        int64_t x[4];
        cu_unravel(d.ne, i, x);
        cu_store(d, x[0], x[1], x[2], x[3], cu_unary_value(op, cu_load(a, x[0], x[1], x[2], x[3]), s));
    }
};

// -- fused element-wise nodes --
// The element-wise nodes right after a GEMV, a norm or a rope (cu_plan_epilogue) can run as its
// epilogue: each takes the previous node's value of the element (as stored: every output is F32)
// and, for a binary op, its other operand the way cu_binary reads it, and stores its own node, so
// every intermediate is written as if the nodes ran one by one (and gives the same bits); a
// set_rows ends the chain, writing the value into the destination's row rows[...] instead.
#define CU_EPI_MAX 3
struct cu_epi_op {
    int op;                // ADD, SUB, MUL, DIV, SILU, SET_ROWS
    int other_first;       // binary: the other operand is src[0]
    cu_tensor out, other;  // SET_ROWS: other = the rows
};
struct cu_epilogue {
    int n;
    int64_t pne[4];        // the producer's shape (a set_rows sees its elements in that order)
    cu_fault *fault;
    char name[MMS_MAX_NAME];   // a set_rows node's, for a bad index
    cu_epi_op ops[CU_EPI_MAX];
    HD void apply(float v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
        for (int k = 0; k < CU_EPI_MAX; k++) {      // a fixed count: ops[k] stays in the parameter space, no copy
            if (k >= n) return;
            const cu_epi_op &e = ops[k];
            if (e.op == MMS_OP_SET_ROWS) {
                const int64_t flat = i0 + pne[0] * (i1 + pne[1] * (i2 + pne[2] * i3)), w = e.out.ne[0];
                const int32_t r = *(const int32_t *)(e.other.data + (flat / w) * e.other.nb[0]);
                if (r < 0 || r >= e.out.ne[1]) { cu_report(fault, MMS_OP_SET_ROWS, name, r, flat / w, e.out.ne[1]); return; }
                cu_store(e.out, flat % w, r, 0, 0, v);
                return;
            }
            if (e.op == MMS_OP_SILU) v = cu_unary_value(MMS_OP_SILU, v, 0.0f);
            else {
                const cu_tensor &o = e.other;
                const float w = e.other_first ? cu_load(o, i0, i1, i2, i3) : cu_load(o, i0 % o.ne[0], i1 % o.ne[1], i2 % o.ne[2], i3 % o.ne[3]);
                v = e.other_first ? cu_binary_value(e.op, w, v) : cu_binary_value(e.op, v, w);
            }
            cu_store(e.out, i0, i1, i2, i3, v);
        }
    }
};

// DUP, CONT, CPY: element i of a (in a's logical order) to element i of dst (in dst's).
struct cu_copy {
    cu_tensor d, a;
    HD void operator()(int64_t i) const {
        int64_t x[4], y[4];
        cu_unravel(a.ne, i, x);
        cu_unravel(d.ne, i, y);
        cu_move(d, y, a, x);
    }
};

struct cu_concat {
    cu_tensor d, a, b;
    int dim;
    HD void operator()(int64_t i) const {
        int64_t x[4];
        cu_unravel(d.ne, i, x);
        if (x[dim] < a.ne[dim]) { cu_move(d, x, a, x); return; }
        int64_t y[4] = { x[0], x[1], x[2], x[3] };
        y[dim] -= a.ne[dim];
        cu_move(d, x, b, y);
    }
};

struct cu_pad {
    cu_tensor d, a;
    HD void operator()(int64_t i) const {
        int64_t x[4];
        cu_unravel(d.ne, i, x);
        if (x[0] < a.ne[0] && x[1] < a.ne[1] && x[2] < a.ne[2] && x[3] < a.ne[3]) { cu_move(d, x, a, x); return; }
        char *p = cu_row(d, x[1], x[2], x[3]) + x[0] * d.nb[0];
        if (cu_type_size(d.type) == 4) *(uint32_t *)p = 0; else *(uint16_t *)p = 0;
    }
};

struct cu_repeat {
    cu_tensor d, a;
    HD void operator()(int64_t i) const {
        int64_t x[4], y[4];
        cu_unravel(d.ne, i, x);
        for (int k = 0; k < 4; k++) y[k] = x[k] % a.ne[k];
        cu_move(d, x, a, y);
    }
};

// dst (i0, i1, i2, i3) = a (i0, rows[i1, i2, i3], i2, i3); a bad row index is reported, not read.
struct cu_get_rows {
    cu_tensor d, a, rows;
    cu_fault *fault;
    char name[MMS_MAX_NAME];
    HD void operator()(int64_t i) const {
        int64_t x[4];
        cu_unravel(d.ne, i, x);
        const int32_t r = *(const int32_t *)(cu_row(rows, x[2], x[3], 0) + x[1] * rows.nb[0]);
        if (r < 0 || r >= a.ne[1]) {
            cu_report(fault, MMS_OP_GET_ROWS, name, r, x[1], a.ne[1]);
            return;
        }
        int64_t y[4] = { x[0], r, x[2], x[3] };
        cu_move(d, x, a, y);
    }
};

// Element i of b (in b's order) to row rows[i1] of dst (a view of the destination); a bad row
// index is reported, not written.
struct cu_set_rows {
    cu_tensor d, b, rows;
    cu_fault *fault;
    char name[MMS_MAX_NAME];
    HD void operator()(int64_t i) const {
        int64_t x[4];
        cu_unravel(b.ne, i, x);
        const int32_t r = *(const int32_t *)(rows.data + x[1] * rows.nb[0]);
        if (r < 0 || r >= d.ne[1]) {
            cu_report(fault, MMS_OP_SET_ROWS, name, r, x[1], d.ne[1]);
            return;
        }
        int64_t y[4] = { x[0], r, x[2], x[3] };
        cu_move(d, y, b, x);
    }
};

// dst column c of row (ox, oy, n): c = (ic*KH + ky)*KW + kx (2-D) or ic*KW + kx (1-D).
struct cu_im2col {
    cu_tensor d, in;
    int64_t KW, KH;
    int s0, s1, p0, p1, d0, d1, is_2d;
    HD void operator()(int64_t i) const {
        int64_t x[4];
        cu_unravel(d.ne, i, x);
        const int64_t c = x[0], kx = c % KW, ky = (c / KW) % KH, ic = c / (KW * KH);
        const int64_t ox = x[1], oy = is_2d ? x[2] : 0, n = is_2d ? x[3] : x[2];
        const int64_t ix = ox * s0 + kx * d0 - p0, iy = oy * s1 + ky * d1 - p1;
        float v = 0.0f;
        if (is_2d) { if (ix >= 0 && ix < in.ne[0] && iy >= 0 && iy < in.ne[1]) v = cu_load(in, ix, iy, ic, n); }
        else       { if (ix >= 0 && ix < in.ne[0]) v = cu_load(in, ix, ic, n, 0); }
        cu_store(d, x[0], x[1], x[2], x[3], v);
    }
};

// Item i of a row: a pair i < n_dims / 2 is rotated; the rest (i >= n_dims / 2) are the dims past
// n_dims, copied. Angles in double like the CPU's and the rotation rounded as the CPU rounds it, so
// both give the same bits.
struct cu_rope {
    cu_tensor d, a, pos, ff;       // ff.data NULL: no frequency factors
    int n_dims, mode;
    float freq_base, freq_scale, attn_factor;
    cu_epilogue epi;
    HD int64_t items_per_row() const { return n_dims / 2 + (d.ne[0] - n_dims); }
    HD void operator()(int64_t i) const {
        const int64_t per = items_per_row(), half = n_dims / 2;
        int64_t r = i / per, k = i % per, x[4];
        x[0] = 0;
        x[1] = r % d.ne[1]; r /= d.ne[1];
        x[2] = r % d.ne[2];
        x[3] = r / d.ne[2];
        if (k >= half) {
            const int64_t j = n_dims + (k - half);
            const float v = cu_load(a, j, x[1], x[2], x[3]);
            cu_store(d, j, x[1], x[2], x[3], v);
            epi.apply(v, j, x[1], x[2], x[3]);
            return;
        }
        double f = (double)freq_scale * pow((double)freq_base, -2.0 * (double)k / (double)n_dims);
        if (ff.data) f /= (double)cu_load(ff, k, 0, 0, 0);
        const int32_t p = *(const int32_t *)(pos.data + x[2] * pos.nb[0]);
        const float theta = (float)p * (float)f;
        const float cs = (float)cos((double)theta) * attn_factor, sn = (float)sin((double)theta) * attn_factor;
        const int64_t j0 = mode == MMS_ROPE_TYPE_NEOX ? k : 2 * k, j1 = mode == MMS_ROPE_TYPE_NEOX ? k + half : 2 * k + 1;
        const float x0 = cu_load(a, j0, x[1], x[2], x[3]), x1 = cu_load(a, j1, x[1], x[2], x[3]);
        const float y0 = cu_mul_rn(x0, cs) - cu_mul_rn(x1, sn), y1 = cu_mul_rn(x0, sn) + cu_mul_rn(x1, cs);   // as the CPU rounds: no FMA
        cu_store(d, j0, x[1], x[2], x[3], y0);
        cu_store(d, j1, x[1], x[2], x[3], y1);
        epi.apply(y0, j0, x[1], x[2], x[3]);
        epi.apply(y1, j1, x[1], x[2], x[3]);
    }
};

static cu_tensor cu_tensor_or_none(const struct mms_tensor *t) {
    cu_tensor c;
    if (t) return cu_tensor_of(t);
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 4; i++) c.ne[i] = 1;
    return c;
}

// -- 4. blocks, and how a node runs ---------------------------------------------------------------
// The kernels below are functors over one thread of a block (cu_thread), so the same code runs
// launched on a GPU and, in tests/cuda_host.h, on the host with a fiber per CUDA thread
// (cu_host_block supplies the barriers, the warp exchange and the tensor-core product there, each
// by its documented meaning).

struct cu_host_block {
    void     (*sync)(struct cu_host_block *b);                                      // every thread of the block
    void     (*syncwarp)(struct cu_host_block *b, int tid);                         // every lane of tid's warp
    uint32_t (*exchange)(struct cu_host_block *b, int tid, uint32_t v, int src_lane);   // within tid's warp
    void     (*mma)(struct cu_host_block *b, int tid, float *d, const uint32_t *a, const uint32_t *bf, int bf16);
};

HD static uint32_t cu_f2u(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}
HD static float cu_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

struct cu_thread {
    int     tid, nthreads;       // threadIdx.x, blockDim.x
    int64_t bx, by, bz;          // the block in the whole grid (launches of a large grid add their offsets)
    int64_t gx, gy, gz;          // the whole grid
    char   *smem;                // the block's dynamic shared memory
    struct cu_host_block *host;  // NULL on the GPU
    HD int lane() const { return tid % 32; }
    HD int warp() const { return tid / 32; }
    HD void sync() const {
#ifdef __CUDA_ARCH__
        __syncthreads();
#else
        host->sync(host);
#endif
    }
    HD void syncwarp() const {
#ifdef __CUDA_ARCH__
        __syncwarp();
#else
        host->syncwarp(host, tid);
#endif
    }
    HD uint32_t shfl_u32(uint32_t v, int src_lane) const {    // every lane of the warp must call it
#ifdef __CUDA_ARCH__
        return __shfl_sync(0xffffffffu, v, src_lane);
#else
        return host->exchange(host, tid, v, src_lane);
#endif
    }
    HD float shfl(float v, int src_lane) const { return cu_u2f(shfl_u32(cu_f2u(v), src_lane)); }
    HD float shfl_xor(float v, int mask) const { return shfl(v, lane() ^ mask); }
    // d += A B for the warp's 16x16 A (a: 4 registers of 2 halves) and 16x8 B (b: 2 registers),
    // f16 (or bf16) in, f32 accumulated: mma.sync.aligned.m16n8k16.row.col, every lane calls it.
    // The fragment layout (PTX ISA, "matrix fragments for mma.m16n8k16"), g = lane / 4, t = lane % 4:
    // a register r holds A[g + 8 (r % 2)][2t + 8 (r / 2) + {0, 1}], b register r holds
    // B[2t + 8r + {0, 1}][g], d[i] is D[g + 8 (i / 2)][2t + i % 2].
    HD void mma(float *d, const uint32_t *a, const uint32_t *b, bool bf16) const {
#ifdef __CUDA_ARCH__
#if __CUDA_ARCH__ >= 800
        if (bf16)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        else
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
        __trap();    // supports_op admits tensor-core kernels on sm_80 and later only
#endif
#else
        host->mma(host, tid, d, a, b, bf16 ? 1 : 0);
#endif
    }
};

// A grid of any size; executors launch it as one or more grids within CUDA's limits.
struct cu_grid { int64_t x, y, z; };

#define CU_MAX_GRID_X  2147483647LL
#define CU_MAX_GRID_YZ 65535LL
#define CU_MAX_LAUNCHES 64
struct cu_launch { unsigned x, y, z; int64_t x0, y0, z0; };

// The launches covering g within the limits (x < 2^31, y and z < 2^16 blocks), at most
// CU_MAX_LAUNCHES; 0 when g is empty, -1 when it needs more.
static int cu_split_grid(cu_grid g, cu_launch *out) {
    int n = 0;
    if (g.x <= 0 || g.y <= 0 || g.z <= 0) return 0;
    for (int64_t z0 = 0; z0 < g.z; z0 += CU_MAX_GRID_YZ)
        for (int64_t y0 = 0; y0 < g.y; y0 += CU_MAX_GRID_YZ)
            for (int64_t x0 = 0; x0 < g.x; x0 += CU_MAX_GRID_X) {
                if (n == CU_MAX_LAUNCHES) return -1;
                const cu_launch l = { (unsigned)cu_min64(g.x - x0, CU_MAX_GRID_X), (unsigned)cu_min64(g.y - y0, CU_MAX_GRID_YZ),
                                      (unsigned)cu_min64(g.z - z0, CU_MAX_GRID_YZ), x0, y0, z0 };
                out[n++] = l;
            }
    return n;
}

// One cuBLAS call, column-major: C (m x n, ldc) = A^T B with A stored k x m (lda) and B k x n (ldb),
// `batch` times with the given element strides. A and B have `type` (F32, F16 or BF16), C is F32.
struct cu_gemm {
    int m, n, k, batch;
    enum mms_type type;
    const void *a, *b;
    float *c;
    long long lda, ldb, ldc, stride_a, stride_b, stride_c;
};

HD static float cu_warp_sum(const cu_thread &th, float v) {
    for (int o = 16; o > 0; o >>= 1) v += th.shfl(v, th.lane() ^ o);
    return v;
}
HD static float cu_warp_max(const cu_thread &th, float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, th.shfl(v, th.lane() ^ o));
    return v;
}

// Sum (or max) over the block; every thread gets the result. scratch: 32 floats of shared memory.
HD static float cu_block_reduce(const cu_thread &th, float v, bool is_max, float *scratch) {
    v = is_max ? cu_warp_max(th, v) : cu_warp_sum(th, v);
    th.sync();                         // scratch may still be read by a previous reduction
    if (th.lane() == 0) scratch[th.warp()] = v;
    th.sync();
    v = th.lane() < th.nthreads / 32 ? scratch[th.lane()] : (is_max ? -INFINITY : 0.0f);
    return is_max ? cu_warp_max(th, v) : cu_warp_sum(th, v);
}

HD static void cu_row_of(const cu_tensor &t, int64_t r, int64_t *x) {
    x[0] = 0;
    x[1] = r % t.ne[1]; r /= t.ne[1];
    x[2] = r % t.ne[2];
    x[3] = r / t.ne[2];
}

// -- 5. row ops: a block per row -----------------------------------------------------------------

#define CU_ROW_THREADS 256

// NORM / RMS_NORM: the mean first (layer norm), then the squares around it. smem: 32 floats.
struct cu_norm_rows {
    cu_tensor d, a;
    float eps;
    int rms;
    cu_epilogue epi;
    HD void operator()(const cu_thread &th) const {
        float *scratch = (float *)th.smem;
        int64_t x[4];
        const int64_t n = d.ne[0];
        cu_row_of(d, th.bx, x);
        float mean = 0.0f, s = 0.0f;
        if (!rms) {
            for (int64_t i = th.tid; i < n; i += th.nthreads) s += cu_load(a, i, x[1], x[2], x[3]);
            mean = cu_block_reduce(th, s, false, scratch) / (float)n;
            s = 0.0f;
        }
        for (int64_t i = th.tid; i < n; i += th.nthreads) { const float v = cu_load(a, i, x[1], x[2], x[3]) - mean; s += v * v; }
        const float scale = 1.0f / sqrtf(cu_block_reduce(th, s, false, scratch) / (float)n + eps);
        for (int64_t i = th.tid; i < n; i += th.nthreads) {
            const float v = (cu_load(a, i, x[1], x[2], x[3]) - mean) * scale;
            cu_store(d, i, x[1], x[2], x[3], v);
            epi.apply(v, i, x[1], x[2], x[3]);
        }
    }
};

struct cu_sum_rows {
    cu_tensor d, a;
    HD void operator()(const cu_thread &th) const {
        int64_t x[4];
        cu_row_of(a, th.bx, x);
        float s = 0.0f;
        for (int64_t i = th.tid; i < a.ne[0]; i += th.nthreads) s += cu_load(a, i, x[1], x[2], x[3]);
        s = cu_block_reduce(th, s, false, (float *)th.smem);
        if (th.tid == 0) cu_store(d, 0, x[1], x[2], x[3], s);
    }
};

// The first index of the maximum; NaN never wins (a row of NaN gives 0, as on the CPU).
// smem: a value and an index per thread.
struct cu_argmax {
    cu_tensor d, a;
    HD static bool better(float v, int64_t i, float w, int64_t j) {   // (v, i) before (w, j)?
        if (i < 0) return false;
        if (j < 0) return true;
        if (v != v) return w != w && i < j;
        return w != w || v > w || (v == w && i < j);
    }
    HD void operator()(const cu_thread &th) const {
        float *best_v = (float *)th.smem;
        int64_t *best_i = (int64_t *)(th.smem + sizeof(float) * CU_ROW_THREADS);
        int64_t x[4];
        cu_row_of(a, th.bx, x);
        float bv = NAN;
        int64_t bi = -1;
        for (int64_t i = th.tid; i < a.ne[0]; i += th.nthreads) {
            const float v = cu_load(a, i, x[1], x[2], x[3]);
            if (better(v, i, bv, bi)) { bv = v; bi = i; }
        }
        best_v[th.tid] = bv;
        best_i[th.tid] = bi;
        th.sync();
        for (int s = th.nthreads / 2; s > 0; s >>= 1) {
            if (th.tid < s && better(best_v[th.tid + s], best_i[th.tid + s], best_v[th.tid], best_i[th.tid])) {
                best_v[th.tid] = best_v[th.tid + s];
                best_i[th.tid] = best_i[th.tid + s];
            }
            th.sync();
        }
        if (th.tid == 0) ((int32_t *)d.data)[th.bx] = (int32_t)(best_i[0] < 0 ? 0 : best_i[0]);
    }
};

HD static float cu_mask_at(const cu_tensor &m, int64_t j, int64_t i1, int64_t i2, int64_t i3) {
    return cu_load(m, j, i1, i2 % m.ne[2], i3 % m.ne[3]);
}

// softmax(a * scale + mask) over the row; a row entirely masked gives zeros. smem: 32 floats.
struct cu_soft_max {
    cu_tensor d, a, mask;    // mask.data NULL: none
    float scale;
    HD float value(int64_t i, const int64_t *x) const {
        return cu_load(a, i, x[1], x[2], x[3]) * scale + (mask.data ? cu_mask_at(mask, i, x[1], x[2], x[3]) : 0.0f);
    }
    HD void operator()(const cu_thread &th) const {
        float *scratch = (float *)th.smem;
        int64_t x[4];
        const int64_t n = d.ne[0];
        cu_row_of(d, th.bx, x);
        float m = -INFINITY, s = 0.0f;
        for (int64_t i = th.tid; i < n; i += th.nthreads) m = fmaxf(m, value(i, x));
        m = cu_block_reduce(th, m, true, scratch);
        if (m != -INFINITY) for (int64_t i = th.tid; i < n; i += th.nthreads) s += expf(value(i, x) - m);
        s = cu_block_reduce(th, s, false, scratch);
        for (int64_t i = th.tid; i < n; i += th.nthreads) cu_store(d, i, x[1], x[2], x[3], m == -INFINITY ? 0.0f : expf(value(i, x) - m) / s);
    }
};

// -- 6. attention ---------------------------------------------------------------------------------
// Three kernels, chosen by shape (cu_flash_attn_node):
//   decode  (at most 8 query rows per KV head: n_q * H / Hkv): split-K over the keys, a block per
//           KV head and chunk of keys serving every query head of the group, f32 arithmetic, 128-bit
//           loads of K and V; a combine kernel merges the chunks (or one chunk writes the result);
//   tensor cores (prefill, the vision encoder; sm_80+, D and Dv 64, 80 or 128): mma.sync m16n8k16
//           with Q, K, V and the weights P rounded to F16 (BF16 when K/V are BF16), f32 accumulated;
//   scalar  everything else (D up to 256): a block per 16 query rows of one head, f32.
// Every kernel takes the mask as given (any strides, F32 or F16) and shared mask rows.

// What every attention kernel reads: the tensors, scale and softcap, the mask and its shared rows.
struct cu_fa_args {
    cu_tensor d, q, k, v, mask, rows;   // mask.data, rows.data NULL: none
    float scale, softcap;
    cu_fault *fault;                    // a shared mask row out of range is reported here
    char name[MMS_MAX_NAME];
    // The mask row query iq adds; -1 (every key masked, and a fault) for a shared row out of range.
    HD int64_t mask_row(int64_t iq) const {
        if (!rows.data) return iq;
        const int32_t r = *(const int32_t *)(rows.data + iq * rows.nb[0]);
        if (r >= 0 && r < mask.ne[1]) return r;
        cu_report(fault, MMS_OP_FLASH_ATTN_EXT, name, r, iq, mask.ne[1]);
        return -1;
    }
    HD float mask_at(int64_t mrow, int64_t j, int64_t h, int64_t ib) const {
        if (!mask.data) return 0.0f;
        return mrow < 0 ? -INFINITY : cu_load(mask, j, mrow, h % mask.ne[2], ib % mask.ne[3]);
    }
    HD float capped(float s) const { return softcap != 0.0f ? softcap * tanhf(s / softcap) : s; }
};

// Eight consecutive values of a K or V row as f32 (VEC: 16-byte aligned rows, 128-bit loads).
template <int T, bool VEC> HD static void cu_load8(const cu_tensor &t, int64_t i0, int64_t j, int64_t h, int64_t ib, float *out) {
    const char *p = cu_row(t, j, h, ib) + i0 * t.nb[0];
    if (!VEC) { for (int e = 0; e < 8; e++) out[e] = cu_load(t, i0 + e, j, h, ib); return; }
    if (T == MMS_TYPE_F32) {
        const float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
        out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w; out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
        return;
    }
    const uint4 w = *(const uint4 *)p;
    const uint32_t u[4] = { w.x, w.y, w.z, w.w };
    for (int e = 0; e < 4; e++) {
        if (T == MMS_TYPE_F16) { out[2 * e] = cu_half_to_float((uint16_t)u[e]); out[2 * e + 1] = cu_half_to_float((uint16_t)(u[e] >> 16)); }
        else                   { out[2 * e] = cu_u2f(u[e] << 16); out[2 * e + 1] = cu_u2f(u[e] & 0xffff0000u); }
    }
}

// -- decode: split-K --
#define CU_FA_DEC_ROWS 8       // query rows per KV head (n_q x heads per group) it takes
#define CU_FA_DEC_THREADS 128
#define CU_FA_CHUNK_MAX 256

// The key chunk: a multiple of 64, enough chunks for two blocks per SM, at most CU_FA_CHUNK_MAX.
static int64_t cu_fa_chunk(int64_t n_kv, int64_t heads_x_batch, int n_sm) {
    const int64_t want = (2 * (int64_t)n_sm + heads_x_batch - 1) / heads_x_batch;
    int64_t chunk = (n_kv + want - 1) / want;
    chunk = (chunk + 63) / 64 * 64;
    return chunk < 64 ? 64 : chunk > CU_FA_CHUNK_MAX ? CU_FA_CHUNK_MAX : chunk;
}

// Grid (chunks, Hkv, B). smem: Q [R][D], scores [R][chunk], partial outputs [groups][R][Dv] (f32).
// One chunk: the result directly; else per (chunk, row) the max m, the sum l and the unnormalized
// output into part (chunk-major: [chunks][B][Hkv][R][Dv + 2]) for cu_fa_combine.
template <int T, bool VEC> struct cu_fa_decode {
    cu_fa_args f;
    int64_t chunk;
    float *part;
    HD static int lanes_per_key(int64_t D) { int l = 1; while (l * 8 < D) l *= 2; return l; }
    HD static size_t smem_size(int64_t R, int64_t D, int64_t Dv, int64_t chunk) {
        const int64_t groups = CU_FA_DEC_THREADS / (Dv / 8);
        return (size_t)(R * D + R * chunk + groups * R * Dv + 2 * R) * sizeof(float);
    }
    HD void operator()(const cu_thread &th) const {
        const int64_t D = f.q.ne[0], Dv = f.v.ne[0], n_kv = f.k.ne[1], G = f.q.ne[2] / f.k.ne[2], R = f.q.ne[1] * G;
        const int64_t kh = th.by, ib = th.bz, j0 = th.bx * chunk, nk = cu_min64(chunk, n_kv - j0);
        const int tid = th.tid;
        float *qs = (float *)th.smem, *s = qs + R * D, *po = s + R * chunk, *ml = po + (CU_FA_DEC_THREADS / (Dv / 8)) * R * Dv;
        int64_t mrow[CU_FA_DEC_ROWS], hh[CU_FA_DEC_ROWS];
        for (int r = 0; r < CU_FA_DEC_ROWS; r++) {          // row r: query r / G of head kh * G + r % G
            const int64_t rr = r < R ? r : 0;
            hh[r] = kh * G + rr % G;
            mrow[r] = f.mask.data ? f.mask_row(rr / G) : 0;
        }
        for (int64_t e = tid; e < R * D; e += th.nthreads) qs[e] = cu_load(f.q, e % D, (e / D) / G, kh * G + (e / D) % G, ib) * f.scale;
        th.sync();
        // scores: lanes_per_key lanes per key, 8 dims each, reduced by shuffles within the group
        const int L = lanes_per_key(D), slice = tid % L;
        for (int64_t jb = 0; jb < nk; jb += CU_FA_DEC_THREADS / L) {
            const int64_t jj = jb + tid / L, j = j0 + jj;
            const bool key = jj < nk;
            float dot[CU_FA_DEC_ROWS], mk[CU_FA_DEC_ROWS];
            bool any = false;
            for (int r = 0; r < CU_FA_DEC_ROWS; r++) {
                mk[r] = key && r < R ? f.mask_at(mrow[r], j, hh[r], ib) : -INFINITY;
                any = any || mk[r] != -INFINITY;
                dot[r] = 0.0f;
            }
            if (any && slice * 8 < D) {                      // a key masked for every row is never read
                float kv[8];
                cu_load8<T, VEC>(f.k, slice * 8, j, kh, ib, kv);
                for (int r = 0; r < CU_FA_DEC_ROWS; r++) {
                    if (r >= R) break;
                    const float *qr = qs + r * D + slice * 8;
                    for (int e = 0; e < 8; e++) dot[r] += qr[e] * kv[e];
                }
            }
            for (int r = 0; r < CU_FA_DEC_ROWS; r++)
                for (int o = L / 2; o > 0; o >>= 1) dot[r] += th.shfl_xor(dot[r], o);
            if (key && slice == 0)
                for (int r = 0; r < CU_FA_DEC_ROWS; r++)
                    if (r < R) s[r * chunk + jj] = mk[r] == -INFINITY ? -INFINITY : f.capped(dot[r]) + mk[r];
        }
        th.sync();
        // softmax over the chunk, a warp per row
        for (int64_t r = th.warp(); r < R; r += th.nthreads / 32) {
            float m = -INFINITY, l = 0.0f;
            for (int64_t jj = th.lane(); jj < nk; jj += 32) m = fmaxf(m, s[r * chunk + jj]);
            m = cu_warp_max(th, m);
            for (int64_t jj = th.lane(); jj < nk; jj += 32) {
                const float p = m == -INFINITY ? 0.0f : expf(s[r * chunk + jj] - m);
                s[r * chunk + jj] = p;
                l += p;
            }
            l = cu_warp_sum(th, l);
            if (th.lane() == 0) { ml[2 * r] = m; ml[2 * r + 1] = l; }
        }
        th.sync();
        // P V: thread (slice, group) sums 8 output dims over every groups-th key
        const int ns = (int)(Dv / 8), groups = CU_FA_DEC_THREADS / ns, vs = tid % ns, grp = tid / ns;
        float o[CU_FA_DEC_ROWS][8];
        for (int r = 0; r < CU_FA_DEC_ROWS; r++) for (int e = 0; e < 8; e++) o[r][e] = 0.0f;
        if (grp < groups)
            for (int64_t jj = grp; jj < nk; jj += groups) {
                bool any = false;
                for (int r = 0; r < CU_FA_DEC_ROWS; r++) any = any || (r < R && s[r * chunk + jj] > 0.0f);
                if (!any) continue;
                float vv[8];
                cu_load8<T, VEC>(f.v, vs * 8, j0 + jj, kh, ib, vv);
                for (int r = 0; r < CU_FA_DEC_ROWS; r++) {
                    if (r >= R) break;
                    const float p = s[r * chunk + jj];
                    for (int e = 0; e < 8; e++) o[r][e] += p * vv[e];
                }
            }
        if (grp < groups)
            for (int r = 0; r < CU_FA_DEC_ROWS; r++)
                if (r < R) for (int e = 0; e < 8; e++) po[(grp * R + r) * Dv + vs * 8 + e] = o[r][e];
        th.sync();
        const bool whole = th.gx == 1;
        for (int64_t e = tid; e < R * Dv; e += th.nthreads) {
            const int64_t r = e / Dv, c = e % Dv;
            float sum = 0.0f;
            for (int g = 0; g < groups; g++) sum += po[(g * R + r) * Dv + c];
            if (whole) {
                const float l = ml[2 * r + 1];
                cu_store(f.d, c, kh * G + r % G, r / G, ib, l > 0.0f ? sum / l : 0.0f);   // all keys masked: zeros
            } else {
                float *pr = part + (((th.bx * f.q.ne[3] + ib) * f.k.ne[2] + kh) * R + r) * (Dv + 2);
                pr[c] = sum;
                if (c == 0) { pr[Dv] = ml[2 * r]; pr[Dv + 1] = ml[2 * r + 1]; }
            }
        }
    }
};

// The chunks' partial results merged: a block per (row of the group, KV head, batch).
struct cu_fa_combine {
    cu_tensor d;
    const float *part;
    int64_t n_chunks, R, G, Hkv, B;
    HD void operator()(const cu_thread &th) const {
        const int64_t r = th.bx, kh = th.by, ib = th.bz, Dv = d.ne[0];
        float m = -INFINITY, l = 0.0f;
        for (int64_t c = 0; c < n_chunks; c++) m = fmaxf(m, part[(((c * B + ib) * Hkv + kh) * R + r) * (Dv + 2) + Dv]);
        for (int64_t c = 0; c < n_chunks; c++) {
            const float *pr = part + (((c * B + ib) * Hkv + kh) * R + r) * (Dv + 2);
            if (pr[Dv] != -INFINITY) l += pr[Dv + 1] * expf(pr[Dv] - m);
        }
        for (int64_t e = th.tid; e < Dv; e += th.nthreads) {
            float o = 0.0f;
            for (int64_t c = 0; c < n_chunks; c++) {
                const float *pr = part + (((c * B + ib) * Hkv + kh) * R + r) * (Dv + 2);
                if (pr[Dv] != -INFINITY) o += pr[e] * expf(pr[Dv] - m);
            }
            cu_store(d, e, kh * G + r % G, r / G, ib, l > 0.0f ? o / l : 0.0f);
        }
    }
};

// -- tensor cores --
#define CU_FA_TC_ROWS 64       // query rows per block (16 per warp)
#define CU_FA_TC_KEYS 64       // keys per tile

HD static uint16_t cu_to_half16(float x, bool bf16) { return bf16 ? cu_float_to_bf16(x) : cu_float_to_half(x); }
HD static uint32_t cu_pack2(float lo, float hi, bool bf16) { return (uint32_t)cu_to_half16(lo, bf16) | ((uint32_t)cu_to_half16(hi, bf16) << 16); }
HD static uint32_t cu_smem_u32(const uint16_t *p) { return *(const uint32_t *)p; }

// Grid (row blocks, Hkv, B), 4 warps. Rows are (query, head of the group) pairs, r = iq * G + h % G.
// smem (16-bit values, rows padded by 8 against bank conflicts): Q [64][D + 8], K [64][D + 8],
// V transposed [Dv][64 + 8], the mask tile [64][64] as f32, a flag.
template <int T, int D, int DV, bool VEC> struct cu_fa_mma {
    cu_fa_args f;
    enum { QLD = D + 8, VLD = CU_FA_TC_KEYS + 8 };
    HD static size_t smem_size() {
        return (size_t)(CU_FA_TC_ROWS * QLD + CU_FA_TC_KEYS * QLD + DV * VLD) * sizeof(uint16_t) +
               (size_t)CU_FA_TC_ROWS * (CU_FA_TC_KEYS * sizeof(float) + sizeof(int64_t)) + 16;
    }
    HD void operator()(const cu_thread &th) const {
        const bool bf = T == MMS_TYPE_BF16;
        const int64_t n_kv = f.k.ne[1], G = f.q.ne[2] / f.k.ne[2], R = f.q.ne[1] * G, kh = th.by, ib = th.bz, r0 = th.bx * CU_FA_TC_ROWS;
        uint16_t *qs = (uint16_t *)th.smem, *ks = qs + CU_FA_TC_ROWS * QLD, *vt = ks + CU_FA_TC_KEYS * QLD;
        float *mt = (float *)(vt + DV * VLD);
        int64_t *mrow = (int64_t *)(mt + CU_FA_TC_ROWS * CU_FA_TC_KEYS);   // each row's mask row
        int *flag = (int *)(mrow + CU_FA_TC_ROWS);
        const int lane = th.lane(), w = th.warp(), g = lane / 4, t4 = lane % 4;
        for (int64_t e = th.tid; e < CU_FA_TC_ROWS * D; e += th.nthreads) {       // Q, pre-scaled, rounded to 16 bits
            const int64_t rr = e / D, c = e % D, r = r0 + rr;
            qs[rr * QLD + c] = cu_to_half16(r < R ? cu_load(f.q, c, r / G, kh * G + r % G, ib) * f.scale : 0.0f, bf);
        }
        for (int64_t rr = th.tid; rr < CU_FA_TC_ROWS; rr += th.nthreads) mrow[rr] = f.mask.data && r0 + rr < R ? f.mask_row((r0 + rr) / G) : 0;
        th.sync();
        uint32_t qa[D / 16][4];
        for (int ks16 = 0; ks16 < D / 16; ks16++)
            for (int i = 0; i < 4; i++) qa[ks16][i] = cu_smem_u32(qs + (w * 16 + g + 8 * (i % 2)) * QLD + ks16 * 16 + 2 * t4 + 8 * (i / 2));
        float o[DV / 8][4], m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f };
        for (int n = 0; n < DV / 8; n++) for (int i = 0; i < 4; i++) o[n][i] = 0.0f;
        for (int64_t j0 = 0; j0 < n_kv; j0 += CU_FA_TC_KEYS) {
            th.sync();                                     // the previous tile is no longer read
            if (th.tid == 0) *flag = 0;
            th.sync();
            int seen = 0;
            for (int64_t e = th.tid; e < CU_FA_TC_ROWS * CU_FA_TC_KEYS; e += th.nthreads) {   // the mask tile, keys past n_kv masked
                const int64_t rr = e / CU_FA_TC_KEYS, jj = e % CU_FA_TC_KEYS, r = r0 + rr, j = j0 + jj;
                float mv = -INFINITY;
                if (r < R && j < n_kv) mv = f.mask_at(mrow[rr], j, kh * G + r % G, ib);
                mt[e] = mv;
                seen |= mv != -INFINITY;
            }
            if (seen) cu_atomic_or_shared(flag, 1);
            th.sync();
            if (!*flag) continue;                          // every key of the tile masked for every row: skipped
            for (int64_t e = th.tid; e < CU_FA_TC_KEYS * (D / 8); e += th.nthreads) {     // K rows, 8 values at a time
                const int64_t jj = e / (D / 8), c = (e % (D / 8)) * 8, j = j0 + jj;
                float kv[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
                if (j < n_kv) cu_load8<T, VEC>(f.k, c, j, kh, ib, kv);
                for (int x = 0; x < 8; x += 2) *(uint32_t *)(ks + jj * QLD + c + x) = cu_pack2(kv[x], kv[x + 1], bf);
            }
            for (int64_t e = th.tid; e < CU_FA_TC_KEYS * (DV / 8); e += th.nthreads) {    // V transposed
                const int64_t jj = e % CU_FA_TC_KEYS, c = (e / CU_FA_TC_KEYS) * 8, j = j0 + jj;
                float vv[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
                if (j < n_kv) cu_load8<T, VEC>(f.v, c, j, kh, ib, vv);
                for (int x = 0; x < 8; x++) vt[(c + x) * VLD + jj] = cu_to_half16(vv[x], bf);
            }
            th.sync();
            // S = Q K^T for the warp's 16 rows and the tile's 64 keys
            float sc[CU_FA_TC_KEYS / 8][4];
            for (int n = 0; n < CU_FA_TC_KEYS / 8; n++) {
                for (int i = 0; i < 4; i++) sc[n][i] = 0.0f;
                for (int ks16 = 0; ks16 < D / 16; ks16++) {
                    const uint16_t *kr = ks + (n * 8 + g) * QLD + ks16 * 16 + 2 * t4;
                    const uint32_t bfrag[2] = { cu_smem_u32(kr), cu_smem_u32(kr + 8) };
                    th.mma(sc[n], qa[ks16], bfrag, bf);
                }
            }
            // softcap, mask, the streaming softmax (rows g and g + 8; a row's 64 values on 4 lanes)
            float mx[2] = { -INFINITY, -INFINITY };
            for (int n = 0; n < CU_FA_TC_KEYS / 8; n++)
                for (int i = 0; i < 4; i++) {
                    const float mv = mt[(w * 16 + g + 8 * (i / 2)) * CU_FA_TC_KEYS + n * 8 + 2 * t4 + i % 2];
                    sc[n][i] = mv == -INFINITY ? -INFINITY : f.capped(sc[n][i]) + mv;
                    mx[i / 2] = fmaxf(mx[i / 2], sc[n][i]);
                }
            float corr[2];
            for (int h = 0; h < 2; h++) {
                mx[h] = fmaxf(mx[h], th.shfl_xor(mx[h], 1));
                mx[h] = fmaxf(mx[h], th.shfl_xor(mx[h], 2));
                const float mn = fmaxf(m[h], mx[h]);
                corr[h] = mn == -INFINITY ? 1.0f : expf(m[h] - mn);      // exp(-inf) = 0: nothing kept yet
                m[h] = mn;
                l[h] *= corr[h];
            }
            for (int n = 0; n < CU_FA_TC_KEYS / 8; n++)
                for (int i = 0; i < 4; i++) {
                    const float p = m[i / 2] == -INFINITY ? 0.0f : expf(sc[n][i] - m[i / 2]);
                    sc[n][i] = p;
                    l[i / 2] += p;
                }
            for (int n = 0; n < DV / 8; n++) for (int i = 0; i < 4; i++) o[n][i] *= corr[i / 2];
            // O += P V: P's accumulator layout is the next A operand's, two key tiles per k step
            for (int kk = 0; kk < CU_FA_TC_KEYS / 16; kk++) {
                const uint32_t pa[4] = { cu_pack2(sc[2 * kk][0], sc[2 * kk][1], bf), cu_pack2(sc[2 * kk][2], sc[2 * kk][3], bf),
                                         cu_pack2(sc[2 * kk + 1][0], sc[2 * kk + 1][1], bf), cu_pack2(sc[2 * kk + 1][2], sc[2 * kk + 1][3], bf) };
                for (int n = 0; n < DV / 8; n++) {
                    const uint16_t *vr = vt + (n * 8 + g) * VLD + kk * 16 + 2 * t4;
                    const uint32_t bfrag[2] = { cu_smem_u32(vr), cu_smem_u32(vr + 8) };
                    th.mma(o[n], pa, bfrag, bf);
                }
            }
        }
        for (int h = 0; h < 2; h++) {
            l[h] += th.shfl_xor(l[h], 1);
            l[h] += th.shfl_xor(l[h], 2);
        }
        for (int i = 0; i < 4; i++) {
            const int64_t r = r0 + w * 16 + g + 8 * (i / 2);
            if (r >= R) continue;
            const float inv = l[i / 2] > 0.0f ? 1.0f / l[i / 2] : 0.0f;    // all keys masked: zeros
            for (int n = 0; n < DV / 8; n++) cu_store(f.d, n * 8 + 2 * t4 + i % 2, kh * G + r % G, r / G, ib, o[n][i] * inv);
        }
    }
};

// -- scalar: a block of 4 warps takes 16 query rows of one head (4 per warp) against tiles of 32
// keys held in shared memory as f32: lane j scores key j of the tile for the warp's rows, the
// streaming softmax runs per row across the lanes, then every lane accumulates output dims lane,
// lane + 32, ... over the tile. D and Dv up to 256. Grid: (query blocks, heads, batch).

#define CU_FA_ROWS_PER_WARP 4
#define CU_FA_WARPS 4
#define CU_FA_KEYS 32
#define CU_FA_MAX_D 256

struct cu_flash_attn {
    cu_fa_args f;
    HD static size_t smem_size(int64_t D, int64_t Dv) {
        return (size_t)(CU_FA_ROWS_PER_WARP * CU_FA_WARPS * D + CU_FA_KEYS * (D + 1) + CU_FA_KEYS * Dv) * sizeof(float);
    }
    HD void operator()(const cu_thread &th) const {
        const cu_tensor &q = f.q, &k = f.k, &v = f.v;
        const int64_t D = q.ne[0], Dv = v.ne[0], n_q = q.ne[1], n_kv = k.ne[1];
        const int64_t h = th.by, ib = th.bz, kh = h / (q.ne[2] / k.ne[2]);
        const int lane = th.lane(), warp = th.warp();
        const int rows = CU_FA_ROWS_PER_WARP * CU_FA_WARPS;
        float *qs = (float *)th.smem;                      // [rows][D]
        float *ks = qs + rows * D;                         // [KEYS][D + 1] (padded: lanes read different keys)
        float *vs = ks + CU_FA_KEYS * (D + 1);             // [KEYS][Dv]
        const int64_t q0 = th.bx * rows;
        for (int64_t e = th.tid; e < rows * D; e += th.nthreads) {
            const int64_t r = e / D, c = e % D;
            qs[e] = q0 + r < n_q ? cu_load(q, c, q0 + r, h, ib) * f.scale : 0.0f;
        }
        float o[CU_FA_ROWS_PER_WARP][CU_FA_MAX_D / 32];
        float m[CU_FA_ROWS_PER_WARP], l[CU_FA_ROWS_PER_WARP];
        int64_t mrow[CU_FA_ROWS_PER_WARP];
        for (int r = 0; r < CU_FA_ROWS_PER_WARP; r++) {
            const int64_t iq = q0 + warp * CU_FA_ROWS_PER_WARP + r;
            m[r] = -INFINITY;
            l[r] = 0.0f;
            mrow[r] = f.mask.data && iq < n_q ? f.mask_row(iq) : 0;
            for (int t = 0; t < CU_FA_MAX_D / 32; t++) o[r][t] = 0.0f;
        }
        for (int64_t j0 = 0; j0 < n_kv; j0 += CU_FA_KEYS) {
            th.sync();                                     // the previous tile is no longer read
            for (int64_t e = th.tid; e < CU_FA_KEYS * D; e += th.nthreads) {
                const int64_t j = e / D, c = e % D;
                ks[j * (D + 1) + c] = j0 + j < n_kv ? cu_load(k, c, j0 + j, kh, ib) : 0.0f;
            }
            for (int64_t e = th.tid; e < CU_FA_KEYS * Dv; e += th.nthreads) {
                const int64_t j = e / Dv, c = e % Dv;
                vs[e] = j0 + j < n_kv ? cu_load(v, c, j0 + j, kh, ib) : 0.0f;
            }
            th.sync();
            const int64_t key = j0 + lane;
            for (int r = 0; r < CU_FA_ROWS_PER_WARP; r++) {
                const int64_t iq = q0 + warp * CU_FA_ROWS_PER_WARP + r;
                if (iq >= n_q) break;                      // the same for the whole warp
                const float *qr = qs + (int64_t)(warp * CU_FA_ROWS_PER_WARP + r) * D, *kr = ks + (int64_t)lane * (D + 1);
                float s = 0.0f;
                for (int64_t c = 0; c < D; c++) s += qr[c] * kr[c];
                s = f.capped(s);
                if (key >= n_kv) s = -INFINITY;
                else s += f.mask_at(mrow[r], key, h, ib);
                const float m_tile = cu_warp_max(th, s);
                if (m_tile == -INFINITY) continue;         // every key of the tile masked: weights 0
                const float m_new = fmaxf(m[r], m_tile), corr = expf(m[r] - m_new);   // exp(-inf) = 0 the first time
                const float pj = expf(s - m_new);
                l[r] = l[r] * corr + cu_warp_sum(th, pj);
                m[r] = m_new;
                for (int t = 0; t < CU_FA_MAX_D / 32; t++) o[r][t] *= corr;
                for (int jj = 0; jj < CU_FA_KEYS; jj++) {
                    const float w = th.shfl(pj, jj);
                    const float *vr = vs + (int64_t)jj * Dv;
                    for (int t = 0; t < CU_FA_MAX_D / 32; t++) {
                        const int64_t c = lane + 32 * t;
                        if (c < Dv) o[r][t] += w * vr[c];
                    }
                }
            }
        }
        for (int r = 0; r < CU_FA_ROWS_PER_WARP; r++) {
            const int64_t iq = q0 + warp * CU_FA_ROWS_PER_WARP + r;
            if (iq >= n_q) break;
            const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;   // all keys masked: zeros
            for (int t = 0; t < CU_FA_MAX_D / 32; t++) {
                const int64_t c = lane + 32 * t;
                if (c < Dv) cu_store(f.d, c, h, iq, ib, o[r][t] * inv);
            }
        }
    }
};

// -- 7. mul_mat -----------------------------------------------------------------------------------

// Decode-size products (b with at most CU_GEMV_MAX_N columns) run as GEMV kernels, one per weight
// type, chosen at compile time: a block of 4 warps, each warp CU_GEMV_ROWS rows of a, every column
// of b at once (the weights are read once for all of them). Grid: (rows / 8, batch).
#define CU_GEMV_MAX_N 8
#define CU_GEMV_WARPS 4
#define CU_GEMV_ROWS 2

HD static int cu_round_int(float x) {     // to nearest, ties to even
#ifdef __CUDA_ARCH__
    return __float2int_rn(x);
#else
    return (int)lrintf(x);
#endif
}

// dp4a: c + the sum of the four products of a's and b's signed bytes (PTX dp4a.s32.s32).
HD static int cu_dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(uint8_t)((uint32_t)a >> (8 * i)) * (int)(int8_t)(uint8_t)((uint32_t)b >> (8 * i));
    return c;
#endif
}

// Four unsigned bytes q (each < 128) minus k in every byte, as signed bytes: no borrow crosses a
// byte (bit 7 set first, cleared after).
HD static uint32_t cu_bytes_minus(uint32_t q, uint32_t k4) { return ((q | 0x80808080u) - k4) ^ 0x80808080u; }

HD static int cu_warp_sum_int(const cu_thread &th, int v) {
    for (int o = 16; o > 0; o >>= 1) v += (int)th.shfl_u32((uint32_t)v, th.lane() ^ o);
    return v;
}

// -- activations in 8 bits --
// A row of b as the block-type GEMV reads it: K int8 values, then per block of 32 its step (f32)
// and the sum of its 32 values (int32); rows 16-byte aligned. Rounded once per product.
HD static size_t cu_q8_row_bytes(int64_t K) { return ((size_t)K + 8 * (size_t)(K / 32) + 15) / 16 * 16; }

// A warp per block of 32 values (8 per CUDA block); row r of the grid's y is b's row (n, i2, i3).
// The step is max |x| / 127 (NaN when a value is NaN, so the product is NaN as in f32).
struct cu_quantize_q8 {
    cu_tensor b;
    char *out;
    HD void operator()(const cu_thread &th) const {
        const int64_t K = b.ne[0], blk = th.bx * (th.nthreads / 32) + th.warp(), r = th.by;
        if (blk * 32 >= K) return;                          // the same for the whole warp
        const int64_t n = r % b.ne[1], i2 = (r / b.ne[1]) % b.ne[2], i3 = r / (b.ne[1] * b.ne[2]);
        const float x = cu_load(b, blk * 32 + th.lane(), n, i2, i3);
        float amax = fabsf(x);
        int nan = x != x;
        for (int o = 16; o > 0; o >>= 1) {
            amax = fmaxf(amax, th.shfl_xor(amax, o));
            nan |= (int)th.shfl_u32((uint32_t)nan, th.lane() ^ o);
        }
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        const int q = nan ? 0 : cu_round_int(x * id);
        const int sum = cu_warp_sum_int(th, q);
        char *row = out + (size_t)r * cu_q8_row_bytes(K);
        row[blk * 32 + th.lane()] = (char)(int8_t)q;
        if (th.lane() == 0) {
            ((float *)(row + K))[blk] = nan ? NAN : amax / 127.0f;
            ((int32_t *)(row + K + 4 * (K / 32)))[blk] = sum;
        }
    }
};

// -- block-type weights: one 32-value unit of a row against 32 activations --
// cu_qblock<T>: bytes and units (of 32 values) per block; unit_dot(blk, j, a, d8, s8) is unit j
// of the block at blk (in shared memory) dotted with the activations a (8 ints of 4 int8), whose
// step is d8 and sum s8. Scales decoded once per unit; the rest is dp4a.

HD static uint32_t cu_ld32_2(const uint8_t *p) {     // 4 bytes at a 2-byte aligned address
    return (uint32_t)*(const uint16_t *)p | ((uint32_t)*(const uint16_t *)(p + 2) << 16);
}
HD static float cu_f16_at(const uint8_t *p) { return cu_half_to_float(*(const uint16_t *)p); }

template <int T> struct cu_qblock;

template <> struct cu_qblock<MMS_TYPE_Q8_0> {          // f16 d, int8 qs[32]
    enum { BYTES = 34, UNITS = 1 };
    HD static float unit_dot(const uint8_t *blk, int, const int *a, float d8, int) {
        int s = 0;
        for (int i = 0; i < 8; i++) s = cu_dp4a((int)cu_ld32_2(blk + 2 + 4 * i), a[i], s);
        return cu_f16_at(blk) * d8 * (float)s;
    }
};

template <> struct cu_qblock<MMS_TYPE_Q4_0> {          // f16 d, qs[16]: value j low nibble of qs[j], j + 16 the high one; minus 8
    enum { BYTES = 18, UNITS = 1 };
    HD static float unit_dot(const uint8_t *blk, int, const int *a, float d8, int) {
        int s = 0;
        for (int i = 0; i < 4; i++) {
            const uint32_t q = cu_ld32_2(blk + 2 + 4 * i);
            s = cu_dp4a((int)cu_bytes_minus(q & 0x0f0f0f0fu, 0x08080808u), a[i], s);
            s = cu_dp4a((int)cu_bytes_minus((q >> 4) & 0x0f0f0f0fu, 0x08080808u), a[4 + i], s);
        }
        return cu_f16_at(blk) * d8 * (float)s;
    }
};

// Q4_K and Q5_K: f16 d, dmin, scales[12], (Q5_K: qh[32] at QH, value l of sub-block j gets bit j of
// qh[l] as its fifth,) qs[128]; blocks 16-byte aligned, so are qs and qh.
template <int BYTES_, int QH> struct cu_k_affine {
    enum { BYTES = BYTES_, UNITS = 8 };
    HD static float unit_dot(const uint8_t *blk, int j, const int *a, float d8, int s8) {
        const uint8_t *sc = blk + 4;
        const uint4 *qs = (const uint4 *)(blk + (QH ? QH + 32 : 16) + 32 * (j / 2));   // sub-blocks 2c and 2c + 1 share qs[32c ..]
        const int shift = 4 * (j % 2);
        int s = 0;
        for (int v = 0; v < 2; v++) {
            const uint4 w = qs[v];
            const uint32_t u[4] = { w.x, w.y, w.z, w.w };
            uint32_t h[4] = { 0, 0, 0, 0 };
            if (QH) {
                const uint4 x = ((const uint4 *)(blk + QH))[v];
                h[0] = x.x; h[1] = x.y; h[2] = x.z; h[3] = x.w;
            }
            for (int i = 0; i < 4; i++) s = cu_dp4a((int)(((u[i] >> shift) & 0x0f0f0f0fu) | (((h[i] >> j) & 0x01010101u) << 4)), a[4 * v + i], s);
        }
        int sub, m;
        if (j < 4) { sub = sc[j] & 63; m = sc[j + 4] & 63; }
        else       { sub = (sc[j + 4] & 0x0f) | ((sc[j - 4] >> 6) << 4); m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4); }
        return d8 * (cu_f16_at(blk) * (float)(sub * s) - cu_f16_at(blk + 2) * (float)(m * s8));
    }
};
template <> struct cu_qblock<MMS_TYPE_Q4_K> : cu_k_affine<144, 0> {};
template <> struct cu_qblock<MMS_TYPE_Q5_K> : cu_k_affine<176, 16> {};

template <> struct cu_qblock<MMS_TYPE_Q6_K> {          // ql[128], qh[64], int8 scales[16], f16 d; minus 32
    enum { BYTES = 210, UNITS = 8 };
    HD static float unit_dot(const uint8_t *blk, int j, const int *a, float d8, int) {
        const int half = j / 4, quarter = j % 4;
        const uint8_t *ql = blk + 64 * half + 32 * (quarter % 2), *qh = blk + 128 + 32 * half;
        const int8_t *sc = (const int8_t *)(blk + 192 + 8 * half) + 2 * quarter;
        const int shl = 4 * (quarter / 2), shh = 2 * quarter;
        int s0 = 0, s1 = 0;
        for (int i = 0; i < 8; i++) {
            const uint32_t q = ((cu_ld32_2(ql + 4 * i) >> shl) & 0x0f0f0f0fu) | (((cu_ld32_2(qh + 4 * i) >> shh) & 0x03030303u) << 4);
            const int p = cu_dp4a((int)cu_bytes_minus(q, 0x20202020u), a[i], 0);
            if (i < 4) s0 += p; else s1 += p;
        }
        return cu_f16_at(blk + 208) * d8 * (float)(sc[0] * s0 + sc[1] * s1);
    }
};

// 16 bytes from global memory: one 128-bit load from a 16-byte aligned address (VEC), or bytes.
template <bool VEC> struct cu_ld;
template <> struct cu_ld<true> { HD static uint4 v128(const char *p) { return *(const uint4 *)p; } };
template <> struct cu_ld<false> {
    HD static uint4 v128(const char *p) {
        uint32_t w[4];
        for (int i = 0; i < 4; i++) w[i] = (uint32_t)(uint8_t)p[4 * i] | ((uint32_t)(uint8_t)p[4 * i + 1] << 8) |
                                           ((uint32_t)(uint8_t)p[4 * i + 2] << 16) | ((uint32_t)(uint8_t)p[4 * i + 3] << 24);
        const uint4 r = { w[0], w[1], w[2], w[3] };
        return r;
    }
};

// Rows mrow .. of a against every column of b (NMAX: 1 for decode, else up to 8). Each warp
// copies CU_GEMV_UNITS units of its rows to its shared memory with 128-bit loads (rows VEC:
// 16-byte aligned; else byte loads), then every lane dots two units with the 8-bit activations.
// smem: CU_GEMV_WARPS * CU_GEMV_ROWS * chunk bytes.
#define CU_GEMV_UNITS 64
// A GEMV's epilogue, after its sums are stored: lane 0 reads back what it stored (F32) and runs the
// fused nodes. Apart from the unrolled store loop, so the accumulators stay in registers (with
// the epilogue inside it the loop is not unrolled and they go to local memory).
HD static void cu_gemv_epilogue(const cu_epilogue &epi, const cu_tensor &d, int lane, int64_t row0, int64_t M, int64_t n_cols, int64_t i2, int64_t i3) {
    if (epi.n == 0 || lane != 0) return;
    for (int r = 0; r < CU_GEMV_ROWS; r++)
        for (int64_t n = 0; n < n_cols && row0 + r < M; n++) epi.apply(cu_load(d, row0 + r, n, i2, i3), row0 + r, n, i2, i3);
}

template <int T, int NMAX, bool VEC> struct cu_gemv_q {
    cu_tensor d, a;
    const char *act;       // the 8-bit rows of b (cu_quantize_q8)
    int64_t n_cols, b2, b3;   // b's ne[1], ne[2], ne[3]
    cu_epilogue epi;
    enum { CHUNK = CU_GEMV_UNITS / cu_qblock<T>::UNITS * cu_qblock<T>::BYTES };
    HD static size_t smem_size() { return (size_t)CU_GEMV_WARPS * CU_GEMV_ROWS * CHUNK; }
    HD void operator()(const cu_thread &th) const {
        typedef cu_qblock<T> Q;
        const int64_t K = a.ne[0], M = a.ne[1], row0 = (th.bx * CU_GEMV_WARPS + th.warp()) * CU_GEMV_ROWS;
        const int64_t i2 = th.by % b2, i3 = th.by / b2, row_bytes = K / 32 / Q::UNITS * Q::BYTES;
        const size_t q8_row = cu_q8_row_bytes(K);
        uint8_t *stage = (uint8_t *)th.smem + (size_t)th.warp() * CU_GEMV_ROWS * CHUNK;
        const int lane = th.lane();
        if (row0 >= M) return;                             // the same for the whole warp
        // a warp past the last row repeats row0 (read, never stored): every loop has a fixed count
        const char *rows[CU_GEMV_ROWS];
        for (int r = 0; r < CU_GEMV_ROWS; r++) rows[r] = cu_row(a, row0 + r < M ? row0 + r : row0, i2 / (b2 / a.ne[2]), i3 / (b3 / a.ne[3]));
        float acc[CU_GEMV_ROWS][NMAX];
        for (int r = 0; r < CU_GEMV_ROWS; r++) for (int n = 0; n < NMAX; n++) acc[r][n] = 0.0f;
        for (int64_t c0 = 0; c0 < row_bytes; c0 += CHUNK) {
            const int bytes = (int)cu_min64(CHUNK, row_bytes - c0), nvec = bytes / 16;
            th.syncwarp();                                 // the previous chunk is no longer read
            for (int r = 0; r < CU_GEMV_ROWS; r++) {
                for (int v = lane; v < nvec; v += 32) ((uint4 *)(stage + r * CHUNK))[v] = cu_ld<VEC>::v128(rows[r] + c0 + 16 * v);
                for (int e = nvec * 16 + lane; e < bytes; e += 32) stage[r * CHUNK + e] = (uint8_t)rows[r][c0 + e];
            }
            th.syncwarp();
            const int units = bytes / Q::BYTES * Q::UNITS;
            for (int u = lane; u < units; u += 32) {
                const int64_t gu = c0 / Q::BYTES * Q::UNITS + u;   // the unit's index in the row = its activation block
                for (int n = 0; n < NMAX; n++) {
                    if (n >= n_cols) break;
                    const char *arow = act + (size_t)((i3 * b2 + i2) * n_cols + n) * q8_row;
                    const uint4 *aq = (const uint4 *)(arow + 32 * gu);
                    const uint4 a0 = aq[0], a1 = aq[1];
                    const int av[8] = { (int)a0.x, (int)a0.y, (int)a0.z, (int)a0.w, (int)a1.x, (int)a1.y, (int)a1.z, (int)a1.w };
                    const float d8 = ((const float *)(arow + K))[gu];
                    const int s8 = ((const int32_t *)(arow + K + 4 * (K / 32)))[gu];
                    for (int r = 0; r < CU_GEMV_ROWS; r++) acc[r][n] += Q::unit_dot(stage + r * CHUNK + (u / Q::UNITS) * Q::BYTES, u % Q::UNITS, av, d8, s8);
                }
            }
        }
        for (int r = 0; r < CU_GEMV_ROWS; r++)
            for (int n = 0; n < NMAX; n++) {
                if (n >= n_cols) break;
                const float s = cu_warp_sum(th, acc[r][n]);
                if (lane == 0 && row0 + r < M) cu_store(d, row0 + r, n, i2, i3, s);
            }
        cu_gemv_epilogue(epi, d, lane, row0, M, n_cols, i2, i3);
    }
};

// -- float weights (F32, F16, BF16) against f32 activations read as they are --
// A lane takes 16 bytes of each of its warp's rows at a time (VEC: rows and b 16-byte aligned,
// b f32) and the matching activations of every column; else element by element through cu_load.
template <int T> struct cu_wvec;                        // 16 bytes of weights as floats
template <> struct cu_wvec<MMS_TYPE_F32> {
    enum { N = 4, ES = 4 };
    HD static void get(const uint4 &w, float *f) { f[0] = cu_u2f(w.x); f[1] = cu_u2f(w.y); f[2] = cu_u2f(w.z); f[3] = cu_u2f(w.w); }
};
template <> struct cu_wvec<MMS_TYPE_F16> {
    enum { N = 8, ES = 2 };
    HD static void get(const uint4 &w, float *f) {
        const uint32_t u[4] = { w.x, w.y, w.z, w.w };
        for (int i = 0; i < 4; i++) { f[2 * i] = cu_half_to_float((uint16_t)u[i]); f[2 * i + 1] = cu_half_to_float((uint16_t)(u[i] >> 16)); }
    }
};
template <> struct cu_wvec<MMS_TYPE_BF16> {
    enum { N = 8, ES = 2 };
    HD static void get(const uint4 &w, float *f) {
        const uint32_t u[4] = { w.x, w.y, w.z, w.w };
        for (int i = 0; i < 4; i++) { f[2 * i] = cu_u2f(u[i] << 16); f[2 * i + 1] = cu_u2f(u[i] & 0xffff0000u); }
    }
};

template <int T, int NMAX, bool VEC> struct cu_gemv_f {
    cu_tensor d, a, b;
    cu_epilogue epi;
    HD void operator()(const cu_thread &th) const {
        typedef cu_wvec<T> W;
        const int64_t K = a.ne[0], M = a.ne[1], row0 = (th.bx * CU_GEMV_WARPS + th.warp()) * CU_GEMV_ROWS;
        const int64_t i2 = th.by % b.ne[2], i3 = th.by / b.ne[2], n_cols = b.ne[1];
        const int lane = th.lane();
        if (row0 >= M) return;                             // the same for the whole warp
        const int64_t a2 = i2 / (b.ne[2] / a.ne[2]), a3 = i3 / (b.ne[3] / a.ne[3]);
        int64_t rr[CU_GEMV_ROWS];                          // past the last row: row0 again (read, never stored)
        for (int r = 0; r < CU_GEMV_ROWS; r++) rr[r] = row0 + r < M ? row0 + r : row0;
        float acc[CU_GEMV_ROWS][NMAX];
        for (int r = 0; r < CU_GEMV_ROWS; r++) for (int n = 0; n < NMAX; n++) acc[r][n] = 0.0f;
        if (VEC) {
            const char *rows[CU_GEMV_ROWS];
            for (int r = 0; r < CU_GEMV_ROWS; r++) rows[r] = cu_row(a, rr[r], a2, a3);
            for (int64_t k = (int64_t)lane * W::N; k < K; k += 32 * W::N) {
                float w[CU_GEMV_ROWS][W::N];
                for (int r = 0; r < CU_GEMV_ROWS; r++) W::get(*(const uint4 *)(rows[r] + k * W::ES), w[r]);
                for (int n = 0; n < NMAX; n++) {
                    if (n >= n_cols) break;
                    const float4 *xp = (const float4 *)(cu_row(b, n, i2, i3) + k * (int64_t)sizeof(float));
                    float x[W::N];
                    for (int v = 0; v < W::N / 4; v++) { const float4 q = xp[v]; x[4 * v] = q.x; x[4 * v + 1] = q.y; x[4 * v + 2] = q.z; x[4 * v + 3] = q.w; }
                    for (int r = 0; r < CU_GEMV_ROWS; r++)
                        for (int e = 0; e < W::N; e++) acc[r][n] += w[r][e] * x[e];
                }
            }
        } else {
            for (int64_t k = lane; k < K; k += 32)
                for (int n = 0; n < NMAX; n++) {
                    if (n >= n_cols) break;
                    const float x = cu_load(b, k, n, i2, i3);
                    for (int r = 0; r < CU_GEMV_ROWS; r++) acc[r][n] += cu_load(a, k, rr[r], a2, a3) * x;
                }
        }
        for (int r = 0; r < CU_GEMV_ROWS; r++)
            for (int n = 0; n < NMAX; n++) {
                if (n >= n_cols) break;
                const float s = cu_warp_sum(th, acc[r][n]);
                if (lane == 0 && row0 + r < M) cu_store(d, row0 + r, n, i2, i3, s);
            }
        cu_gemv_epilogue(epi, d, lane, row0, M, n_cols, i2, i3);
    }
};

// 16-byte aligned rows (and the batch strides) for 128-bit loads.
static bool cu_rows_aligned(const struct mms_tensor *t) {
    return (uintptr_t)t->data % 16 == 0 && t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 && t->nb[3] % 16 == 0;
}

template <int T, int NMAX, bool VEC, typename Exec>
static enum mms_status cu_run_gemv_q(const Exec &ex, const struct mms_tensor *dst, const char *act, const cu_epilogue &epi) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const cu_gemv_q<T, NMAX, VEC> f = { cu_tensor_of(dst), cu_tensor_of(a), act, b->ne[1], b->ne[2], b->ne[3], epi };
    const cu_grid g = { (a->ne[1] + CU_GEMV_WARPS * CU_GEMV_ROWS - 1) / (CU_GEMV_WARPS * CU_GEMV_ROWS), b->ne[2] * b->ne[3], 1 };
    return ex.blocks(f, g, 32 * CU_GEMV_WARPS, f.smem_size(), "mul_mat GEMV (8-bit activations)");
}
template <int T, typename Exec> static enum mms_status cu_gemv_q_of(const Exec &ex, const struct mms_tensor *dst, const char *act, const cu_epilogue &epi) {
    const bool vec = cu_rows_aligned(dst->src[0]);
    if (dst->src[1]->ne[1] == 1) return vec ? cu_run_gemv_q<T, 1, true>(ex, dst, act, epi) : cu_run_gemv_q<T, 1, false>(ex, dst, act, epi);
    return vec ? cu_run_gemv_q<T, CU_GEMV_MAX_N, true>(ex, dst, act, epi) : cu_run_gemv_q<T, CU_GEMV_MAX_N, false>(ex, dst, act, epi);
}

template <int T, int NMAX, bool VEC, typename Exec> static enum mms_status cu_run_gemv_f(const Exec &ex, const struct mms_tensor *dst, const cu_epilogue &epi) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const cu_gemv_f<T, NMAX, VEC> f = { cu_tensor_of(dst), cu_tensor_of(a), cu_tensor_of(b), epi };
    const cu_grid g = { (a->ne[1] + CU_GEMV_WARPS * CU_GEMV_ROWS - 1) / (CU_GEMV_WARPS * CU_GEMV_ROWS), b->ne[2] * b->ne[3], 1 };
    return ex.blocks(f, g, 32 * CU_GEMV_WARPS, 0, "mul_mat GEMV");
}
template <int T, typename Exec> static enum mms_status cu_gemv_f_of(const Exec &ex, const struct mms_tensor *dst, const cu_epilogue &epi) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const bool vec = cu_rows_aligned(a) && a->ne[0] % cu_wvec<T>::N == 0 && b->type == MMS_TYPE_F32 && b->nb[0] == sizeof(float) && cu_rows_aligned(b);
    if (b->ne[1] == 1) return vec ? cu_run_gemv_f<T, 1, true>(ex, dst, epi) : cu_run_gemv_f<T, 1, false>(ex, dst, epi);
    return vec ? cu_run_gemv_f<T, CU_GEMV_MAX_N, true>(ex, dst, epi) : cu_run_gemv_f<T, CU_GEMV_MAX_N, false>(ex, dst, epi);
}

// 8-bit activations kept for the next products of the same b (a decode layer's q, k and v
// products read one normed row): which b they were made from, and where they are. The graph loop
// forgets them when a node writes b's memory.
struct cu_q8_cache { const struct mms_tensor *b; char *area; };

static size_t cu_q8_need(const struct mms_tensor *t) {
    const struct mms_tensor *b = t->src[1];
    if (t->op != MMS_OP_MUL_MAT || !mms_get_type_traits(t->src[0]->type)->is_quantized || b->ne[1] > CU_GEMV_MAX_N) return 0;
    return (size_t)(b->ne[1] * b->ne[2] * b->ne[3]) * cu_q8_row_bytes(b->ne[0]) + 256;
}

// A decode-size product: for block-type weights b is rounded to 8 bits first (into the scratch, or
// the executor's q8 cache, reused when it already holds this b).
template <typename Exec> static enum mms_status cu_gemv(const Exec &ex, const struct mms_tensor *dst, const cu_epilogue &epi) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    switch (a->type) {
        case MMS_TYPE_F32:  return cu_gemv_f_of<MMS_TYPE_F32>(ex, dst, epi);
        case MMS_TYPE_F16:  return cu_gemv_f_of<MMS_TYPE_F16>(ex, dst, epi);
        case MMS_TYPE_BF16: return cu_gemv_f_of<MMS_TYPE_BF16>(ex, dst, epi);
        default: break;
    }
    char *act = ex.q8 ? ex.q8->area : ex.scratch;
    if (!ex.q8 || ex.q8->b != b) {
        const cu_quantize_q8 q = { cu_tensor_of(b), act };
        const cu_grid g = { (b->ne[0] / 32 + 7) / 8, b->ne[1] * b->ne[2] * b->ne[3], 1 };
        const enum mms_status st = ex.blocks(q, g, 256, 0, "mul_mat: activations to 8 bits");
        if (st != MMS_OK) return st;
        if (ex.q8) ex.q8->b = b;
    }
    switch (a->type) {
        case MMS_TYPE_Q8_0: return cu_gemv_q_of<MMS_TYPE_Q8_0>(ex, dst, act, epi);
        case MMS_TYPE_Q4_0: return cu_gemv_q_of<MMS_TYPE_Q4_0>(ex, dst, act, epi);
        case MMS_TYPE_Q4_K: return cu_gemv_q_of<MMS_TYPE_Q4_K>(ex, dst, act, epi);
        case MMS_TYPE_Q5_K: return cu_gemv_q_of<MMS_TYPE_Q5_K>(ex, dst, act, epi);
        case MMS_TYPE_Q6_K: return cu_gemv_q_of<MMS_TYPE_Q6_K>(ex, dst, act, epi);
        default: return mms_set_error(MMS_ERR_UNSUPPORTED, "CUDA: no GEMV for %s", mms_type_name(a->type));
    }
}

// The type cuBLAS multiplies a in: its own for float types, F16 for block types.
static enum mms_type cu_gemm_type(enum mms_type t) { return t == MMS_TYPE_F32 || t == MMS_TYPE_BF16 ? t : MMS_TYPE_F16; }

static bool cu_rows_dense(const struct mms_tensor *t, enum mms_type as) {
    return t->type == as && t->nb[0] == mms_type_size(as) && t->nb[1] % mms_type_size(as) == 0 && t->nb[2] % mms_type_size(as) == 0;
}

static bool cu_mul_mat_gemv(const struct mms_tensor *t) { return t->src[1]->ne[1] <= CU_GEMV_MAX_N; }

// Scratch bytes a node needs: b in 8 bits for a block-type GEMV, converted copies of a and b for cuBLAS.
static size_t cu_fa_scratch(const struct mms_tensor *fa);
static size_t cu_scratch_need(const struct mms_tensor *t) {
    if (t->op == MMS_OP_FLASH_ATTN_EXT) return cu_fa_scratch(t);
    if (t->op != MMS_OP_MUL_MAT) return 0;
    const struct mms_tensor *a = t->src[0], *b = t->src[1];
    if (cu_mul_mat_gemv(t))
        return mms_get_type_traits(a->type)->is_quantized ? (size_t)(b->ne[1] * b->ne[2] * b->ne[3]) * cu_q8_row_bytes(b->ne[0]) + 256 : 0;
    const enum mms_type as = cu_gemm_type(a->type);
    size_t need = 0;
    if (!cu_rows_dense(a, as)) need += (size_t)mms_nelements(a) * mms_type_size(as) + 256;
    if (!(b->type == as && mms_is_contiguous(b))) need += (size_t)mms_nelements(b) * mms_type_size(as) + 256;
    return need;
}

// A contiguous tensor of type `as` with a's shape, placed at *cursor in scratch.
static struct mms_tensor cu_scratch_tensor(const struct mms_tensor *a, enum mms_type as, char **cursor) {
    struct mms_tensor t;
    memset(&t, 0, sizeof t);
    t.type = as;
    for (int i = 0; i < 4; i++) t.ne[i] = a->ne[i];
    t.nb[0] = mms_type_size(as);
    for (int i = 1; i < 4; i++) t.nb[i] = t.nb[i - 1] * (size_t)t.ne[i - 1];
    t.data = *cursor;
    *cursor += (mms_nbytes(&t) + 255) / 256 * 256;
    return t;
}

template <typename Exec> static enum mms_status cu_mul_mat(const Exec &ex, const struct mms_tensor *dst, const cu_epilogue &epi) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    if (cu_mul_mat_gemv(dst)) return cu_gemv(ex, dst, epi);
    const enum mms_type as = cu_gemm_type(a->type);
    const size_t es = mms_type_size(as);
    char *cursor = ex.scratch;
    struct mms_tensor ac = *a, bc = *b;
    enum mms_status st;
    if (!cu_rows_dense(a, as)) {
        ac = cu_scratch_tensor(a, as, &cursor);
        const cu_copy f = { cu_tensor_of(&ac), cu_tensor_of(a) };
        if ((st = ex.each(f, mms_nelements(a), "mul_mat: converting a")) != MMS_OK) return st;
    }
    if (!(b->type == as && mms_is_contiguous(b))) {
        bc = cu_scratch_tensor(b, as, &cursor);
        const cu_copy f = { cu_tensor_of(&bc), cu_tensor_of(b) };
        if ((st = ex.each(f, mms_nelements(b), "mul_mat: converting b")) != MMS_OK) return st;
    }
    // Without broadcasting one strided batch over every head; with grouped heads one batch per KV
    // head, in which the r2 query heads sharing it see a stride of 0 in a.
    const int64_t groups = r2 == 1 ? 1 : a->ne[2];
    for (int64_t i3 = 0; i3 < b->ne[3]; i3++)
        for (int64_t g = 0; g < groups; g++) {
            cu_gemm gm;
            gm.m = (int)M; gm.n = (int)N; gm.k = (int)K;
            gm.batch = (int)(r2 == 1 ? b->ne[2] : r2);
            gm.type = as;
            gm.a = (const char *)ac.data + g * ac.nb[2] + (i3 / r3) * ac.nb[3];
            gm.b = (const char *)bc.data + g * r2 * bc.nb[2] + i3 * bc.nb[3];
            gm.c = (float *)((char *)dst->data + g * r2 * dst->nb[2] + i3 * dst->nb[3]);
            gm.lda = (long long)(ac.nb[1] / es);
            gm.ldb = (long long)(bc.nb[1] / es);
            gm.ldc = (long long)(dst->nb[1] / sizeof(float));
            gm.stride_a = r2 == 1 ? (long long)(ac.nb[2] / es) : 0;
            gm.stride_b = (long long)(bc.nb[2] / es);
            gm.stride_c = (long long)(dst->nb[2] / sizeof(float));
            if ((st = ex.gemm(gm)) != MMS_OK) return st;
        }
    return MMS_OK;
}

// -- attention: choosing the kernel --

#define CU_FA_TARGET_BLOCKS 256   // decode: enough key chunks for about two blocks per SM of a large GPU

static bool cu_fa_vec(const struct mms_tensor *t) {   // 128-bit loads of K and V rows
    return t->nb[0] == mms_type_size(t->type) && cu_rows_aligned(t);
}
static int64_t cu_fa_rows(const struct mms_tensor *fa) { return fa->src[0]->ne[1] * (fa->src[0]->ne[2] / fa->src[1]->ne[2]); }
static bool cu_fa_decode_fits(const struct mms_tensor *fa) {
    const int64_t D = fa->src[0]->ne[0], Dv = fa->src[2]->ne[0];
    return cu_fa_rows(fa) <= CU_FA_DEC_ROWS && D % 8 == 0 && Dv % 8 == 0 && D <= CU_FA_MAX_D && Dv <= CU_FA_MAX_D;
}
static bool cu_fa_mma_fits(const struct mms_tensor *fa) {
    const int64_t D = fa->src[0]->ne[0], Dv = fa->src[2]->ne[0];
    return D == Dv && (D == 64 || D == 80 || D == 128) && cu_fa_vec(fa->src[1]) && cu_fa_vec(fa->src[2]);
}
static int64_t cu_fa_chunks(const struct mms_tensor *fa, int64_t *chunk) {
    const struct mms_tensor *k = fa->src[1];
    *chunk = cu_fa_chunk(k->ne[1], k->ne[2] * k->ne[3], CU_FA_TARGET_BLOCKS / 2);
    return (k->ne[1] + *chunk - 1) / *chunk;
}
// Scratch for the decode kernel's partial results (more than one chunk).
static size_t cu_fa_scratch(const struct mms_tensor *fa) {
    int64_t chunk;
    if (!cu_fa_decode_fits(fa)) return 0;
    const int64_t n = cu_fa_chunks(fa, &chunk);
    return n > 1 ? (size_t)(n * fa->src[1]->ne[2] * fa->src[1]->ne[3] * cu_fa_rows(fa) * (fa->src[2]->ne[0] + 2)) * sizeof(float) + 256 : 0;
}

template <int T, bool VEC, typename Exec> static enum mms_status cu_fa_run_decode(const Exec &ex, const cu_fa_args &f, const struct mms_tensor *fa) {
    int64_t chunk;
    const int64_t n = cu_fa_chunks(fa, &chunk), R = cu_fa_rows(fa), G = f.q.ne[2] / f.k.ne[2];
    const cu_fa_decode<T, VEC> k = { f, chunk, (float *)ex.scratch };
    const cu_grid g = { n, f.k.ne[2], f.k.ne[3] };
    enum mms_status st = ex.blocks(k, g, CU_FA_DEC_THREADS, k.smem_size(R, f.q.ne[0], f.v.ne[0], chunk), "flash attention (decode)");
    if (st != MMS_OK || n == 1) return st;
    const cu_fa_combine c = { f.d, (const float *)ex.scratch, n, R, G, f.k.ne[2], f.k.ne[3] };
    const cu_grid gc = { R, f.k.ne[2], f.k.ne[3] };
    return ex.blocks(c, gc, 128, 0, "flash attention (combine)");
}
template <int T, int D, typename Exec> static enum mms_status cu_fa_run_mma(const Exec &ex, const cu_fa_args &f, const struct mms_tensor *fa) {
    const cu_fa_mma<T, D, D, true> k = { f };
    const cu_grid g = { (cu_fa_rows(fa) + CU_FA_TC_ROWS - 1) / CU_FA_TC_ROWS, f.k.ne[2], f.k.ne[3] };
    return ex.blocks(k, g, 128, k.smem_size(), "flash attention (tensor cores)");
}
template <int T, typename Exec> static enum mms_status cu_fa_typed(const Exec &ex, const cu_fa_args &f, const struct mms_tensor *fa) {
    if (cu_fa_decode_fits(fa))
        return cu_fa_vec(fa->src[1]) && cu_fa_vec(fa->src[2]) ? cu_fa_run_decode<T, true>(ex, f, fa) : cu_fa_run_decode<T, false>(ex, f, fa);
    if (ex.tensor_cores && cu_fa_mma_fits(fa)) {
        switch (fa->src[0]->ne[0]) {
            case 64:  return cu_fa_run_mma<T, 64>(ex, f, fa);
            case 80:  return cu_fa_run_mma<T, 80>(ex, f, fa);
            default:  return cu_fa_run_mma<T, 128>(ex, f, fa);
        }
    }
    const cu_flash_attn k = { f };
    const unsigned rows = CU_FA_ROWS_PER_WARP * CU_FA_WARPS;
    const cu_grid g = { (f.q.ne[1] + rows - 1) / rows, f.q.ne[2], f.q.ne[3] };
    return ex.blocks(k, g, 32 * CU_FA_WARPS, cu_flash_attn::smem_size(f.q.ne[0], f.v.ne[0]), "flash attention");
}

template <typename Exec> static enum mms_status cu_flash_attn_node(const Exec &ex, const struct mms_tensor *t) {
    cu_fa_args f;
    f.d = cu_tensor_of(t);
    f.q = cu_tensor_of(t->src[0]);
    f.k = cu_tensor_of(t->src[1]);
    f.v = cu_tensor_of(t->src[2]);
    f.mask = cu_tensor_or_none(t->src[3]);
    f.rows = cu_tensor_or_none(t->src[4]);
    f.scale = mms_get_op_params_f32(t, 0);
    f.softcap = mms_get_op_params_f32(t, 2);
    f.fault = ex.fault;
    snprintf(f.name, sizeof f.name, "%s", t->name);
    switch (t->src[1]->type) {
        case MMS_TYPE_F16:  return cu_fa_typed<MMS_TYPE_F16>(ex, f, t);
        case MMS_TYPE_BF16: return cu_fa_typed<MMS_TYPE_BF16>(ex, f, t);
        default:            return cu_fa_typed<MMS_TYPE_F32>(ex, f, t);
    }
}

// -- a node --

// Computes node t with an executor: ex.each(functor, n, name) runs an element functor over n
// items, ex.blocks(functor, grid, threads, smem, name) a block functor, ex.gemm(cu_gemm) one
// cuBLAS product; ex.scratch is cu_scratch_need(t) bytes; ex.fault takes bad indices; ex.q8 (may
// be NULL) keeps 8-bit activations between products; ex.tensor_cores says whether mma.sync runs.
// epi: the element-wise nodes fused after t (cu_plan_epilogue; n 0 for none). The backend's
// executor launches on its stream; tests/cuda_host.h has one that runs on the host.
template <typename Exec> static enum mms_status cu_compute_fused(const Exec &ex, const struct mms_tensor *t, const cu_epilogue &epi) {
    const cu_tensor d = cu_tensor_of(t), a = cu_tensor_or_none(t->src[0]), b = cu_tensor_or_none(t->src[1]);
    const int64_t n = mms_nelements(t);
    const char *name = mms_op_name(t->op);
    switch (t->op) {
        case MMS_OP_ADD: case MMS_OP_SUB: case MMS_OP_MUL: case MMS_OP_DIV: {
            const cu_binary f = { d, a, b, (int)t->op };
            return ex.each(f, n, name);
        }
        case MMS_OP_SCALE: case MMS_OP_SQR: case MMS_OP_SQRT: case MMS_OP_EXP: case MMS_OP_TANH:
        case MMS_OP_SILU: case MMS_OP_GELU: case MMS_OP_GELU_TANH: {
            const cu_unary f = { d, a, (int)t->op, t->op == MMS_OP_SCALE ? mms_get_op_params_f32(t, 0) : 0.0f };
            return ex.each(f, n, name);
        }
        case MMS_OP_DUP: case MMS_OP_CONT: case MMS_OP_CPY: {
            const cu_copy f = { d, a };
            return ex.each(f, mms_nelements(t->src[0]), name);
        }
        case MMS_OP_CONCAT: {
            const cu_concat f = { d, a, b, mms_get_op_params_i32(t, 0) };
            return ex.each(f, n, name);
        }
        case MMS_OP_PAD:    { const cu_pad f = { d, a };    return ex.each(f, n, name); }
        case MMS_OP_REPEAT: { const cu_repeat f = { d, a }; return ex.each(f, n, name); }
        case MMS_OP_GET_ROWS: {
            cu_get_rows f = { d, a, b, ex.fault, "" };
            snprintf(f.name, sizeof f.name, "%s", t->name);
            return ex.each(f, n, name);
        }
        case MMS_OP_SET_ROWS: {
            cu_set_rows f = { d, a, b, ex.fault, "" };
            snprintf(f.name, sizeof f.name, "%s", t->name);
            return ex.each(f, mms_nelements(t->src[0]), name);
        }
        case MMS_OP_IM2COL: {
            const bool is_2d = mms_get_op_params_i32(t, 6) != 0;
            const cu_im2col f = { d, b, t->src[0]->ne[0], is_2d ? t->src[0]->ne[1] : 1,
                                  mms_get_op_params_i32(t, 0), mms_get_op_params_i32(t, 1), mms_get_op_params_i32(t, 2),
                                  mms_get_op_params_i32(t, 3), mms_get_op_params_i32(t, 4), mms_get_op_params_i32(t, 5), is_2d ? 1 : 0 };
            return ex.each(f, n, name);
        }
        case MMS_OP_ROPE: {
            const cu_rope f = { d, a, b, cu_tensor_or_none(t->src[2]), mms_get_op_params_i32(t, 0), mms_get_op_params_i32(t, 1),
                                mms_get_op_params_f32(t, 3), mms_get_op_params_f32(t, 4), mms_get_op_params_f32(t, 6), epi };
            return ex.each(f, mms_nrows(t) * f.items_per_row(), name);
        }
        case MMS_OP_NORM: case MMS_OP_RMS_NORM: {
            const cu_norm_rows f = { d, a, mms_get_op_params_f32(t, 0), t->op == MMS_OP_RMS_NORM, epi };
            const cu_grid grid = { mms_nrows(t), 1, 1 };
            return ex.blocks(f, grid, CU_ROW_THREADS, 32 * sizeof(float), name);
        }
        case MMS_OP_SUM_ROWS: {
            const cu_sum_rows f = { d, a };
            const cu_grid grid = { mms_nrows(t->src[0]), 1, 1 };
            return ex.blocks(f, grid, CU_ROW_THREADS, 32 * sizeof(float), name);
        }
        case MMS_OP_ARGMAX: {
            const cu_argmax f = { d, a };
            const cu_grid grid = { mms_nrows(t->src[0]), 1, 1 };
            return ex.blocks(f, grid, CU_ROW_THREADS, CU_ROW_THREADS * (sizeof(float) + sizeof(int64_t)), name);
        }
        case MMS_OP_SOFT_MAX: {
            const cu_soft_max f = { d, a, b, mms_get_op_params_f32(t, 0) };
            const cu_grid grid = { mms_nrows(t), 1, 1 };
            return ex.blocks(f, grid, CU_ROW_THREADS, 32 * sizeof(float), name);
        }
        case MMS_OP_FLASH_ATTN_EXT:
            return cu_flash_attn_node(ex, t);
        case MMS_OP_MUL_MAT:
            return cu_mul_mat(ex, t, epi);
        default:
            return mms_set_error(MMS_ERR_UNSUPPORTED, "CUDA: no kernel for %s", name);
    }
}

static const cu_epilogue cu_no_epilogue = { 0, { 0, 0, 0, 0 }, NULL, "", {} };
template <typename Exec> static enum mms_status cu_compute_node(const Exec &ex, const struct mms_tensor *t) { return cu_compute_fused(ex, t, cu_no_epilogue); }

// -- fusing element-wise nodes into the node before them --

static const char *cu_lo(const struct mms_tensor *t) { return (const char *)t->data; }
static const char *cu_hi(const struct mms_tensor *t) {       // one past the last byte t covers
    size_t end = mms_type_size(t->type) * (size_t)(t->ne[0] / mms_blck_size(t->type));
    for (int k = 1; k < 4; k++) end += (size_t)(t->ne[k] - 1) * t->nb[k];
    return (const char *)t->data + end;
}
static bool cu_overlap(const struct mms_tensor *a, const struct mms_tensor *b) { return cu_lo(a) < cu_hi(b) && cu_lo(b) < cu_hi(a); }
static bool cu_same_shape(const struct mms_tensor *a, const struct mms_tensor *b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

// The next node after i that computes something (views compute nothing), or -1.
static int cu_next_compute(struct mms_cgraph *g, int i) {
    for (int j = i + 1; j < mms_graph_n_nodes(g); j++) {
        const struct mms_tensor *t = mms_graph_node(g, j);
        if (t->op != MMS_OP_NONE && !mms_op_is_view(t->op)) return j;
    }
    return -1;
}

// Do a and b hold the same elements in the same places (an in-place node)? Then the thread that
// writes element i of one has itself read element i of the other.
static bool cu_same_place(const struct mms_tensor *a, const struct mms_tensor *b) {
    return a->data == b->data && a->type == b->type && cu_same_shape(a, b) && a->nb[0] == b->nb[0] && a->nb[1] == b->nb[1] &&
           a->nb[2] == b->nb[2] && a->nb[3] == b->nb[3];
}

// What the fused kernel touches so far: the producer p (its sources are read whole, by every
// thread), the fused nodes' outputs and the other operands they read.
struct cu_fused_set {
    const struct mms_tensor *p;
    int n;
    const struct mms_tensor *outs[CU_EPI_MAX], *others[CU_EPI_MAX];   // others[k]: NULL for a unary op
};

// May a fused node write u's memory? Not where p's sources are (other threads may still read any
// element of them); where p, a fused output or an other operand is, only in the same places.
static bool cu_fused_may_write(const struct mms_tensor *u, const struct mms_tensor *own_other, const cu_fused_set *fs) {
    for (int k = 0; k < MMS_MAX_SRC; k++) if (fs->p->src[k] && cu_overlap(u, fs->p->src[k])) return false;
    if (cu_overlap(u, fs->p) && !cu_same_place(u, fs->p)) return false;
    if (own_other && cu_overlap(u, own_other) && !cu_same_place(u, own_other)) return false;
    for (int k = 0; k < fs->n; k++)
        if ((cu_overlap(u, fs->outs[k]) && !cu_same_place(u, fs->outs[k])) ||
            (fs->others[k] && cu_overlap(u, fs->others[k]) && !cu_same_place(u, fs->others[k]))) return false;
    return true;
}

// Can node u run as an element of the epilogue of cur (produced just before it)? Its output is
// F32 (so the next op reads what it stores), it reads cur element for element, a binary op's
// other operand is not written by the fused nodes before it, and its own output is written where
// cu_fused_may_write allows.
static bool cu_epilogue_takes(const struct mms_tensor *u, const struct mms_tensor *cur, const cu_fused_set *fs) {
    if (mms_nelements(u) == 0) return false;
    if (u->op == MMS_OP_SET_ROWS) {      // rows of a contiguous view of cur, laid out as cur is
        const struct mms_tensor *b = u->src[0];
        return (b == cur || b->view_src == cur) && mms_is_contiguous(b) && mms_is_contiguous(cur) && mms_nelements(b) == mms_nelements(cur) &&
               b->ne[2] == 1 && b->ne[3] == 1 && cu_is_float(u->type) && u->src[1]->type == MMS_TYPE_I32 &&
               !cu_overlap(u->src[1], fs->p) && cu_fused_may_write(u, u->src[1], fs);
    }
    if (u->type != MMS_TYPE_F32 || !cu_same_shape(u, cur)) return false;
    if (u->op == MMS_OP_SILU) return u->src[0] == cur && cu_fused_may_write(u, NULL, fs);
    if (u->op != MMS_OP_ADD && u->op != MMS_OP_SUB && u->op != MMS_OP_MUL && u->op != MMS_OP_DIV) return false;
    if ((u->src[0] == cur) == (u->src[1] == cur)) return false;
    const struct mms_tensor *o = u->src[0] == cur ? u->src[1] : u->src[0];
    if (!cu_is_float(o->type) || cu_overlap(o, fs->p)) return false;
    for (int k = 0; k < fs->n; k++) if (cu_overlap(o, fs->outs[k])) return false;
    return cu_fused_may_write(u, o, fs);
}

// Does node w depend on t (t itself or a view of it among its sources)?
static bool cu_reads(const struct mms_tensor *w, const struct mms_tensor *t) {
    for (int k = 0; k < MMS_MAX_SRC; k++) if (w->src[k] && (w->src[k] == t || w->src[k]->view_src == t)) return true;
    return false;
}

// The epilogue of node i (a decode GEMV, a norm, a rope): the element-wise nodes after it that
// read it element by element, up to CU_EPI_MAX, a set_rows ending the chain. A node between them
// that needs none of them (a gate's tanh) may run first instead (hoist, at most CU_HOIST), when its
// output overlaps nothing the fused nodes read or write. Returns the last node taken (i: none).
#define CU_HOIST 2
static int cu_plan_epilogue(struct mms_cgraph *g, int i, cu_epilogue *epi, cu_fault *fault, int *hoist, int *n_hoist) {
    const struct mms_tensor *p = mms_graph_node(g, i), *cur = p;
    cu_fused_set fs;
    int last = i, scan = i, nh = 0, hs[CU_HOIST];
    memset(epi, 0, sizeof *epi);
    memset(&fs, 0, sizeof fs);
    fs.p = p;
    epi->fault = fault;
    *n_hoist = 0;
    for (int k = 0; k < 4; k++) epi->pne[k] = p->ne[k];
    if (p->type != MMS_TYPE_F32) return i;
    if (!(p->op == MMS_OP_NORM || p->op == MMS_OP_RMS_NORM || p->op == MMS_OP_ROPE || (p->op == MMS_OP_MUL_MAT && cu_mul_mat_gemv(p)))) return i;
    while (epi->n < CU_EPI_MAX) {
        const int j = cu_next_compute(g, scan);
        struct mms_tensor *u = j >= 0 ? mms_graph_node(g, j) : NULL;
        if (!u) break;
        if (!cu_epilogue_takes(u, cur, &fs)) {
            // hoisted: it reads nothing the fused nodes write, and writes nothing they touch
            bool free_of = nh < CU_HOIST && !cu_reads(u, p) && !cu_overlap(u, p);
            for (int k = 0; free_of && k < MMS_MAX_SRC; k++)
                free_of = (!p->src[k] || !cu_overlap(u, p->src[k])) && (!u->src[k] || !cu_overlap(u->src[k], p));
            for (int k = 0; free_of && k < fs.n; k++) {
                free_of = !cu_reads(u, fs.outs[k]) && !cu_overlap(u, fs.outs[k]) && (!fs.others[k] || !cu_overlap(u, fs.others[k]));
                for (int s2 = 0; free_of && s2 < MMS_MAX_SRC; s2++) free_of = !u->src[s2] || !cu_overlap(u->src[s2], fs.outs[k]);
            }
            if (!free_of || u->op == MMS_OP_NONE || mms_nelements(u) == 0) break;
            hs[nh++] = j;                  // run before the fused nodes, if the chain goes on after it
            scan = j;
            continue;
        }
        cu_epi_op *e = &epi->ops[epi->n];
        e->op = u->op;
        e->out = cu_tensor_of(u);
        fs.outs[epi->n] = u;
        fs.others[epi->n] = u->op == MMS_OP_SET_ROWS ? u->src[1] : u->op == MMS_OP_SILU ? NULL : u->src[0] == cur ? u->src[1] : u->src[0];
        fs.n = ++epi->n;
        last = scan = j;
        *n_hoist = nh;                     // the nodes passed on the way to a taken one
        for (int k = 0; k < nh; k++) hoist[k] = hs[k];
        if (u->op == MMS_OP_SET_ROWS) {
            e->other = cu_tensor_of(u->src[1]);
            snprintf(epi->name, sizeof epi->name, "%s", u->name);
            break;
        }
        if (u->op != MMS_OP_SILU) {
            e->other_first = u->src[1] == cur;
            e->other = cu_tensor_of(e->other_first ? u->src[0] : u->src[1]);
        }
        cur = u;
    }
    return last;
}

// Every node of g in order (fused where fuse says so); ex.q8, when set, forgets its activations
// when a node writes their b. A failure names the node.
template <typename Exec> static enum mms_status cu_compute_graph(const Exec &ex, struct mms_cgraph *g, bool fuse, const char *who) {
    for (int i = 0; i < mms_graph_n_nodes(g); i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        cu_epilogue epi;
        if (t->op == MMS_OP_NONE || mms_op_is_view(t->op) || mms_nelements(t) == 0) continue;
        int hoist[CU_HOIST], n_hoist = 0;
        const int last = fuse ? cu_plan_epilogue(g, i, &epi, ex.fault, hoist, &n_hoist) : i;
        enum mms_status st = MMS_OK;
        for (int k = 0; k < n_hoist && st == MMS_OK; k++) st = cu_compute_node(ex, mms_graph_node(g, hoist[k]));
        if (st == MMS_OK) st = last > i ? cu_compute_fused(ex, t, epi) : cu_compute_node(ex, t);
        if (st != MMS_OK) return mms_set_error(st, "%s: node %d (%s %s): %s", who, i, mms_op_name(t->op), mms_get_name(t), mms_last_error());
        for (int j = i; ex.q8 && ex.q8->b && j <= last; j++) {
            const struct mms_tensor *w = mms_graph_node(g, j);
            if (!mms_op_is_view(w->op) && cu_overlap(w, ex.q8->b)) ex.q8->b = NULL;
        }
        i = last;
    }
    return MMS_OK;
}

// -- the GPU executor --

template <typename F> __global__ void cu_each_kernel(F f, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) f(i);
}

template <typename B> __global__ void cu_block_kernel(B body, cu_grid g, int64_t x0, int64_t y0, int64_t z0) {
    extern __shared__ __align__(16) char cu_smem[];
    const cu_thread th = { (int)threadIdx.x, (int)blockDim.x, x0 + blockIdx.x, y0 + blockIdx.y, z0 + blockIdx.z, g.x, g.y, g.z, cu_smem, NULL };
    body(th);
}

static cudaDataType_t cu_blas_type(enum mms_type t) {
    return t == MMS_TYPE_F32 ? CUDA_R_32F : t == MMS_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

// Launches: kernel<<<...>>> on a GPU; in the mock runtime's build (tests/cuda_mock.cu, which
// defines the two functions) the functors run on the host, as the runtime would have run them.
#ifdef MMS_CUDA_MOCK
template <typename F> static void cu_mock_each(const void *kernel, const F &f, int64_t n, unsigned blocks, int threads, cudaStream_t s);
template <typename B> static void cu_mock_blocks(const void *kernel, const B &body, cu_grid g, const cu_launch &l, int threads, size_t smem, cudaStream_t s);
#define CU_LAUNCH_EACH(F, f, n, blocks, threads, s) cu_mock_each((const void *)cu_each_kernel<F>, f, n, blocks, threads, s)
#define CU_LAUNCH_BLOCKS(B, body, g, l, threads, smem, s) cu_mock_blocks((const void *)cu_block_kernel<B>, body, g, l, threads, smem, s)
#else
#define CU_LAUNCH_EACH(F, f, n, blocks, threads, s) cu_each_kernel<F><<<blocks, threads, 0, s>>>(f, n)
#define CU_LAUNCH_BLOCKS(B, body, g, l, threads, smem, s) cu_block_kernel<B><<<dim3((l).x, (l).y, (l).z), threads, smem, s>>>(body, g, (l).x0, (l).y0, (l).z0)
#endif

struct cu_device_exec {
    cudaStream_t   stream;
    cublasHandle_t cublas;
    char          *scratch;
    cu_fault      *fault;
    bool           tensor_cores;   // mma.sync m16n8k16: sm_80 and later
    cu_q8_cache   *q8;
    int            device;
    template <typename F> enum mms_status each(const F &f, int64_t n, const char *what) const {
        if (n <= 0) return MMS_OK;
        const int threads = 256;
        const int64_t blocks = (n + threads - 1) / threads;
        CU_LAUNCH_EACH(F, f, n, (unsigned)(blocks < (1 << 20) ? blocks : (1 << 20)), threads, stream);
        CU_LAUNCHED(what);
        return MMS_OK;
    }
    template <typename B> enum mms_status blocks(const B &body, cu_grid g, int threads, size_t smem, const char *what) const {
        cu_launch l[CU_MAX_LAUNCHES];
        const int n = cu_split_grid(g, l);
        if (n < 0) return mms_set_error(MMS_ERR_UNSUPPORTED, "CUDA: %s: a grid of %lld x %lld x %lld blocks", what, (long long)g.x, (long long)g.y, (long long)g.z);
        static int smem_set[CU_MAX_DEVICES];      // the largest size asked for, per device: set once (and never while capturing)
        if (smem > 48 * 1024 && (int)smem > smem_set[device]) {
            CU_TRY(cudaFuncSetAttribute(cu_block_kernel<B>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            smem_set[device] = (int)smem;
        }
        for (int i = 0; i < n; i++) {
            CU_LAUNCH_BLOCKS(B, body, g, l[i], threads, smem, stream);
            CU_LAUNCHED(what);
        }
        return MMS_OK;
    }
    enum mms_status gemm(const cu_gemm &g) const {
        const float one = 1.0f, zero = 0.0f;
        const cudaDataType_t ty = cu_blas_type(g.type);
        CUBLAS_TRY(cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, g.m, g.n, g.k, &one, g.a, ty, (int)g.lda, g.stride_a,
                                              g.b, ty, (int)g.ldb, g.stride_b, &zero, g.c, CUDA_R_32F, (int)g.ldc, g.stride_c,
                                              g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return MMS_OK;
    }
};

// -- backend state --

struct cu_backend {
    int            device;
    char           name[16];
    cudaStream_t   stream;
    cublasHandle_t cublas;
    void          *scratch;                   // device memory for converted operands, grown as needed
    size_t         scratch_size;
    cu_fault      *fault;                     // mapped pinned memory
    cu_fault      *fault_dev;
    void          *cublas_workspace;          // given to cuBLAS, which then never allocates (needed to capture its calls)
    int            cc_major;                  // compute capability
    cu_q8_cache    q8;                        // 8-bit activations shared by products (area: device memory)
    size_t         q8_size;
    bool           fuse, use_graphs;          // MMS_CUDA_FUSE=0, MMS_CUDA_GRAPHS=0 turn them off
    struct cu_graph_cache *graphs;
    double         signature_us, key_us;      // host time building graph signatures and their keys (read by the mock's bench)
    int64_t        n_unchanged;               // graphs replayed as unchanged, without a signature (read by the mock's tests)
};

// -- 8. buffers -----------------------------------------------------------------------------------

#define CU_ALIGN 256

struct cu_buffer { int device; void *ptr; };

static enum mms_status cu_set_device(int device) {
    CU_TRY(cudaSetDevice(device));
    return MMS_OK;
}

static void *cu_buf_base(mms_backend_buffer_t b) { return ((struct cu_buffer *)b->context)->ptr; }
static void cu_buf_free(mms_backend_buffer_t b) {
    struct cu_buffer *cb = (struct cu_buffer *)b->context;
    cudaSetDevice(cb->device);
    cudaFree(cb->ptr);
    free(cb);
}
// Plain cudaMemcpy/cudaMemset run on the legacy stream, which waits for the backends' (blocking)
// streams: a set or get sees every kernel queued before it.
static enum mms_status cu_buf_memset(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t v, size_t off, size_t n) {
    enum mms_status st = cu_set_device(((struct cu_buffer *)b->context)->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaMemset((char *)t->data + off, v, n));
    return MMS_OK;
}
static enum mms_status cu_buf_set(mms_backend_buffer_t b, struct mms_tensor *t, const void *data, size_t off, size_t n) {
    enum mms_status st = cu_set_device(((struct cu_buffer *)b->context)->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaMemcpy((char *)t->data + off, data, n, cudaMemcpyHostToDevice));
    return MMS_OK;
}
static enum mms_status cu_buf_get(mms_backend_buffer_t b, const struct mms_tensor *t, void *data, size_t off, size_t n) {
    enum mms_status st = cu_set_device(((struct cu_buffer *)b->context)->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaMemcpy(data, (const char *)t->data + off, n, cudaMemcpyDeviceToHost));
    return MMS_OK;
}
static bool cu_buft_is_device(mms_backend_buffer_type_t buft);
static bool cu_buf_cpy(mms_backend_buffer_t b, const struct mms_tensor *src, struct mms_tensor *dst);
static enum mms_status cu_buf_clear(mms_backend_buffer_t b, uint8_t v);
static const struct mms_backend_buffer_i cu_buf_iface = {
    cu_buf_free, cu_buf_base, NULL, cu_buf_memset, cu_buf_set, cu_buf_get, cu_buf_cpy, cu_buf_clear
};
// Direct copies between GPUs need peer access enabled both ways; without it the runtime stages
// them through host memory. Tried once per pair, when a copy first needs it.
static bool cu_peer_tried[CU_MAX_DEVICES][CU_MAX_DEVICES];
static void cu_enable_peer(int a, int b) {
    int current = 0, ok = 0;
    if (a == b || cu_peer_tried[a][b]) return;
    cu_peer_tried[a][b] = cu_peer_tried[b][a] = true;
    if (cudaGetDevice(&current) != cudaSuccess) { cudaGetLastError(); return; }
    for (int k = 0; k < 2; k++) {
        const int from = k ? b : a, to = k ? a : b;
        if (cudaDeviceCanAccessPeer(&ok, from, to) == cudaSuccess && ok && cudaSetDevice(from) == cudaSuccess)
            cudaDeviceEnablePeerAccess(to, 0);     // cudaErrorPeerAccessAlreadyEnabled is fine too
    }
    cudaGetLastError();                            // a pair without peer access just copies through the host
    cudaSetDevice(current);
}

static bool cu_buf_cpy(mms_backend_buffer_t b, const struct mms_tensor *src, struct mms_tensor *dst) {
    if (!src->buffer || !cu_buft_is_device(src->buffer->buft)) return false;   // through the host
    const int sd = ((struct cu_buffer *)src->buffer->context)->device, dd = ((struct cu_buffer *)b->context)->device;
    cu_enable_peer(sd, dd);
    // On the memory's device: its legacy stream is the one that waits for that device's backends.
    cudaError_t e = cudaSetDevice(dd);
    if (e == cudaSuccess) e = sd == dd ? cudaMemcpy(dst->data, src->data, mms_nbytes(src), cudaMemcpyDeviceToDevice)
                                       : cudaMemcpyPeer(dst->data, dd, src->data, sd, mms_nbytes(src));
    if (e != cudaSuccess) { cu_fail(e, "cudaMemcpy (device to device)", __LINE__); return false; }
    return true;
}
static enum mms_status cu_buf_clear(mms_backend_buffer_t b, uint8_t v) {
    enum mms_status st = cu_set_device(((struct cu_buffer *)b->context)->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaMemset(((struct cu_buffer *)b->context)->ptr, v, b->size));
    return MMS_OK;
}

struct cu_buft_ctx { int device; char name[16]; size_t total; };   // total: device memory, read once
static struct cu_buft_ctx             cu_buft_ctx[CU_MAX_DEVICES];
static struct mms_backend_buffer_type cu_buft[CU_MAX_DEVICES];

static const char *cu_buft_name(mms_backend_buffer_type_t t) { return ((struct cu_buft_ctx *)t->context)->name; }
static size_t cu_buft_align(mms_backend_buffer_type_t t) { (void)t; return CU_ALIGN; }
static size_t cu_buft_max_size(mms_backend_buffer_type_t t) {
    const size_t total = ((struct cu_buft_ctx *)t->context)->total;
    return total ? total : SIZE_MAX;
}
static mms_backend_buffer_t cu_buft_alloc(mms_backend_buffer_type_t t, size_t size) {
    const int device = ((struct cu_buft_ctx *)t->context)->device;
    struct cu_buffer *cb = (struct cu_buffer *)calloc(1, sizeof *cb);
    if (!cb) { mms_set_error(MMS_ERR_OOM, "CUDA%d buffer: out of host memory", device); return NULL; }
    cb->device = device;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaMalloc(&cb->ptr, size ? size : 1);
    if (e != cudaSuccess) {
        mms_set_error(e == cudaErrorMemoryAllocation ? MMS_ERR_OOM : MMS_ERR_BACKEND, "CUDA%d buffer: cudaMalloc of %zu bytes (%.1f MiB) failed: %s",
                      device, size, (double)size / 1048576.0, cudaGetErrorString(e));
        cudaGetLastError();            // clear the sticky-free error state
        free(cb);
        return NULL;
    }
    mms_backend_buffer_t b = mms_backend_buffer_init(t, cu_buf_iface, cb, size);
    if (!b) { cudaFree(cb->ptr); free(cb); }
    return b;
}
static bool cu_buft_is_device(mms_backend_buffer_type_t buft) {
    return buft >= &cu_buft[0] && buft < &cu_buft[CU_MAX_DEVICES];
}

// Pinned host memory: host memory (the CPU backend uses it directly) that copies to and from the
// GPU at full speed.
static void *cu_host_base(mms_backend_buffer_t b) { return b->context; }
static void cu_host_free(mms_backend_buffer_t b) { cudaFreeHost(b->context); }
static enum mms_status cu_host_memset(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t v, size_t off, size_t n) {
    (void)b; memset((char *)t->data + off, v, n); return MMS_OK;
}
static enum mms_status cu_host_set(mms_backend_buffer_t b, struct mms_tensor *t, const void *d, size_t off, size_t n) {
    (void)b; memcpy((char *)t->data + off, d, n); return MMS_OK;
}
static enum mms_status cu_host_get(mms_backend_buffer_t b, const struct mms_tensor *t, void *d, size_t off, size_t n) {
    (void)b; memcpy(d, (const char *)t->data + off, n); return MMS_OK;
}
static enum mms_status cu_host_clear(mms_backend_buffer_t b, uint8_t v) { memset(b->context, v, b->size); return MMS_OK; }
static const char *cu_host_buft_name(mms_backend_buffer_type_t t) { (void)t; return "CUDA_Host"; }
static bool cu_host_buft_is_host(mms_backend_buffer_type_t t) { (void)t; return true; }
static size_t cu_host_buft_align(mms_backend_buffer_type_t t) { (void)t; return 64; }
static mms_backend_buffer_t cu_host_buft_alloc(mms_backend_buffer_type_t t, size_t size) {
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, size ? size : 1);
    if (e != cudaSuccess) {
        mms_set_error(MMS_ERR_OOM, "CUDA_Host buffer: cudaMallocHost of %zu bytes failed: %s", size, cudaGetErrorString(e));
        cudaGetLastError();
        return NULL;
    }
    static const struct mms_backend_buffer_i iface = {
        cu_host_free, cu_host_base, NULL, cu_host_memset, cu_host_set, cu_host_get, NULL, cu_host_clear
    };
    mms_backend_buffer_t b = mms_backend_buffer_init(t, iface, p, size);
    if (!b) cudaFreeHost(p);
    return b;
}
static struct mms_backend_buffer_type cu_host_buft;

// -- 9. backend -----------------------------------------------------------------------------------

static struct cu_backend *cu_of(mms_backend_t b) { return (struct cu_backend *)b->context; }


static bool cu_supports_op(mms_backend_t backend, const struct mms_tensor *t) {
    const struct mms_tensor *a = t->src[0], *b = t->src[1];
    (void)backend;
    if (t->op == MMS_OP_NONE || mms_op_is_view(t->op)) return true;
    switch (t->op) {
        case MMS_OP_ADD: case MMS_OP_SUB: case MMS_OP_MUL: case MMS_OP_DIV:
            return cu_is_float(t->type) && cu_is_float(a->type) && cu_is_float(b->type);
        case MMS_OP_SCALE: case MMS_OP_SQR: case MMS_OP_SQRT: case MMS_OP_EXP: case MMS_OP_TANH:
        case MMS_OP_SILU: case MMS_OP_GELU: case MMS_OP_GELU_TANH:
        case MMS_OP_NORM: case MMS_OP_RMS_NORM: case MMS_OP_SUM_ROWS: case MMS_OP_ARGMAX:
            return cu_is_float(a->type);
        case MMS_OP_SOFT_MAX:
            return cu_is_float(a->type) && (!b || b->type == MMS_TYPE_F32 || b->type == MMS_TYPE_F16);
        case MMS_OP_DUP: case MMS_OP_CONT: case MMS_OP_CPY:   // block types only as a source
            return (a->type == t->type && cu_is_plain(a->type)) || (cu_is_float(t->type) && (cu_is_float(a->type) || cu_is_block(a->type)));
        case MMS_OP_CONCAT: case MMS_OP_PAD: case MMS_OP_REPEAT:
            return cu_is_plain(t->type) && cu_is_plain(a->type);
        case MMS_OP_GET_ROWS:
            return (cu_is_plain(a->type) || cu_is_block(a->type)) && b->type == MMS_TYPE_I32;
        case MMS_OP_SET_ROWS:
            return cu_is_float(t->type) && cu_is_float(a->type) && b->type == MMS_TYPE_I32;
        case MMS_OP_IM2COL:
            return cu_is_float(b->type);
        case MMS_OP_ROPE:
            return cu_is_float(a->type) && mms_get_op_params_i32(t, 0) <= a->ne[0];
        case MMS_OP_MUL_MAT:
            return (cu_is_float(a->type) || cu_is_block(a->type)) && cu_is_float(b->type) &&
                   t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 && t->nb[2] % sizeof(float) == 0 &&
                   a->ne[0] <= INT32_MAX && a->ne[1] <= INT32_MAX && b->ne[1] <= INT32_MAX;
        case MMS_OP_FLASH_ATTN_EXT:
            return cu_is_float(a->type) && cu_is_float(t->src[1]->type) && cu_is_float(t->src[2]->type) &&
                   a->ne[0] <= CU_FA_MAX_D && t->src[2]->ne[0] <= CU_FA_MAX_D &&
                   (!t->src[3] || t->src[3]->type == MMS_TYPE_F32 || t->src[3]->type == MMS_TYPE_F16) &&
                   (!t->src[4] || t->src[4]->type == MMS_TYPE_I32);
        default:
            return false;
    }
}

// -- CUDA graphs --
// A graph computed twice (its key among the last CU_GRAPH_RECENT ones) is captured on the
// stream into a CUDA graph and from then on replayed with one launch. The signature is every
// node's op, type, shape, strides, addresses, parameters and name and every source's address,
// type, shape and strides, with the scratch areas: equal signatures launch the same kernels with
// the same arguments. Each KV step of a decode (its graph is the same at every position) is then
// one launch per token. A capture the runtime refuses turns graphs off for the backend.
// The key only picks the entries worth comparing: it mixes a few words per node (op, address,
// shape; all in the signature, so equal signatures have equal keys) instead of every byte of the
// signature. A replay needs the whole signature equal, so graphs sharing a key (say, differing
// only in a stride) are never confused; a shared key can only get a graph seen once captured.
// Each entry also names the graph (mms_graph_id) whose last compute it replayed or captured: a
// graph its scheduler marks unchanged since then (mms_graph_unchanged) is replayed from it
// without the scratch scan, the signature or the key. Any other compute of that graph unbinds it.
#define CU_GRAPHS 8
#define CU_GRAPH_RECENT 8
struct cu_graph_entry { uint64_t key, last_use, graph_id; size_t size; unsigned char *sig; cudaGraphExec_t exec; };
struct cu_graph_cache {
    cu_graph_entry entries[CU_GRAPHS];
    uint64_t recent[CU_GRAPH_RECENT], clock;
    int n_recent, failures;
    unsigned char *sig;                       // the signature being built
    size_t size, cap;
};

static void cu_graphs_clear(struct cu_graph_cache *c) {
    for (int i = 0; c && i < CU_GRAPHS; i++) {
        if (c->entries[i].exec) cudaGraphExecDestroy(c->entries[i].exec);
        free(c->entries[i].sig);
        memset(&c->entries[i], 0, sizeof c->entries[i]);
    }
}

// The signature is written node by node into room reserved once per node (its most bytes), so
// each field is a plain copy.
static unsigned char *cu_sig_put(unsigned char *p, const void *v, size_t n) {
    memcpy(p, v, n);
    return p + n;
}
static unsigned char *cu_sig_tensor(unsigned char *p, const struct mms_tensor *t) {
    const int type = (int)t->type;
    p = cu_sig_put(p, &t->data, sizeof t->data);
    p = cu_sig_put(p, &type, sizeof type);
    p = cu_sig_put(p, t->ne, sizeof t->ne);
    return cu_sig_put(p, t->nb, sizeof t->nb);
}
#define CU_SIG_TENSOR (sizeof(void *) + sizeof(int) + 2 * MMS_MAX_DIMS * sizeof(int64_t))
#define CU_SIG_NODE (sizeof(int) + CU_SIG_TENSOR + MMS_MAX_OP_PARAMS + MMS_MAX_NAME + MMS_MAX_SRC * CU_SIG_TENSOR)
static bool cu_sig_reserve(struct cu_graph_cache *c, size_t n) {
    if (c->size + n <= c->cap) return true;
    const size_t cap = (c->size + n) * 2;
    unsigned char *b = (unsigned char *)realloc(c->sig, cap);
    if (!b) return false;
    c->sig = b;
    c->cap = cap;
    return true;
}
static bool cu_signature(struct cu_backend *cb, struct mms_cgraph *g) {
    struct cu_graph_cache *c = cb->graphs;
    static const char none = 0;
    unsigned char *p;
    c->size = 0;
    if (!cu_sig_reserve(c, sizeof cb->scratch + sizeof cb->q8.area + sizeof cb->fuse)) return false;
    p = cu_sig_put(c->sig, &cb->scratch, sizeof cb->scratch);
    p = cu_sig_put(p, &cb->q8.area, sizeof cb->q8.area);
    p = cu_sig_put(p, &cb->fuse, sizeof cb->fuse);
    c->size = (size_t)(p - c->sig);
    for (int i = 0; i < mms_graph_n_nodes(g); i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        const int op = (int)t->op;
        if (!cu_sig_reserve(c, CU_SIG_NODE)) return false;
        p = cu_sig_put(c->sig + c->size, &op, sizeof op);
        p = cu_sig_tensor(p, t);
        p = cu_sig_put(p, t->op_params, sizeof t->op_params);
        p = cu_sig_put(p, t->name, sizeof t->name);
        for (int k = 0; k < MMS_MAX_SRC; k++) p = t->src[k] ? cu_sig_tensor(p, t->src[k]) : cu_sig_put(p, &none, 1);
        c->size = (size_t)(p - c->sig);
    }
    return true;
}
// A monotonic clock in nanoseconds from C's library: the programs link with the C compiler, without
// the C++ library std::chrono would need.
static int64_t cu_now_ns(void) {
#ifdef CLOCK_MONOTONIC
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
#else
    return mms_time_us() * 1000;
#endif
}
static uint64_t cu_key_mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}
static uint64_t cu_graph_key(struct mms_cgraph *g) {
    uint64_t h = cu_key_mix(0, (uint64_t)mms_graph_n_nodes(g));
    for (int i = 0; i < mms_graph_n_nodes(g); i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        h = cu_key_mix(h, (uint64_t)t->op);
        h = cu_key_mix(h, (uint64_t)(uintptr_t)t->data);
        for (int d = 0; d < MMS_MAX_DIMS; d++) h = cu_key_mix(h, (uint64_t)t->ne[d]);
    }
    return h;
}

// Entry en (or none) holds what graph id was last computed as: no other entry may say so.
static void cu_graphs_bind(struct cu_graph_cache *c, uint64_t id, cu_graph_entry *en) {
    for (int i = 0; i < CU_GRAPHS; i++) if (c->entries[i].graph_id == id) c->entries[i].graph_id = 0;
    if (en) en->graph_id = id;
}

static enum mms_status cu_check_fault(struct cu_backend *cb) {
    if (!cb->fault->set) return MMS_OK;
    cu_fault f = *cb->fault;
    memset(cb->fault, 0, sizeof *cb->fault);
    return cu_fault_status(&f, cb->name);
}

static enum mms_status cu_synchronize(mms_backend_t backend) {
    struct cu_backend *cb = cu_of(backend);
    enum mms_status st = cu_set_device(cb->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaStreamSynchronize(cb->stream));
    return cu_check_fault(cb);
}

// Grows a device area to at least need bytes; *moved tells that captured graphs, which point at it, are stale.
static enum mms_status cu_grow(struct cu_backend *cb, void **area, size_t *size, size_t need, bool *moved) {
    if (need <= *size) return MMS_OK;
    CU_TRY(cudaStreamSynchronize(cb->stream));     // the old area may still be in use
    if (*area) CU_TRY(cudaFree(*area));
    *area = NULL;
    *size = 0;
    CU_TRY(cudaMalloc(area, need));
    *size = need;
    *moved = true;
    return MMS_OK;
}

static enum mms_status cu_run_graph(struct cu_backend *cb, struct mms_cgraph *g) {
    const cu_device_exec ex = { cb->stream, cb->cublas, (char *)cb->scratch, cb->fault_dev, cb->cc_major >= 8, &cb->q8, cb->device };
    cb->q8.b = NULL;
    return cu_compute_graph(ex, g, cb->fuse, cb->name);
}

// Captures g into a CUDA graph (cached) and launches it; false when the runtime refused (the
// caller then computes g as usual).
static bool cu_capture(struct cu_backend *cb, struct mms_cgraph *g, uint64_t key) {
    struct cu_graph_cache *c = cb->graphs;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) { cudaGetLastError(); return false; }
    const enum mms_status st = cu_run_graph(cb, g);
    const cudaError_t e = cudaStreamEndCapture(cb->stream, &graph);
    bool ok = st == MMS_OK && e == cudaSuccess && graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (graph) cudaGraphDestroy(graph);
    int slot = 0;
    for (int i = 1; ok && i < CU_GRAPHS; i++) if (c->entries[i].last_use < c->entries[slot].last_use) slot = i;
    unsigned char *sig = ok ? (unsigned char *)malloc(c->size) : NULL;
    if (!sig || cudaGraphLaunch(exec, cb->stream) != cudaSuccess) {
        cudaGetLastError();
        if (exec) cudaGraphExecDestroy(exec);
        free(sig);
        if (++c->failures >= 3) cb->use_graphs = false;     // computed as usual from now on
        return false;
    }
    cu_graph_entry *en = &c->entries[slot];
    if (en->exec) cudaGraphExecDestroy(en->exec);
    free(en->sig);
    memcpy(sig, c->sig, c->size);
    en->key = key;
    en->size = c->size;
    en->sig = sig;
    en->exec = exec;
    en->last_use = ++c->clock;
    cu_graphs_bind(c, mms_graph_id(g), en);
    return true;
}

static enum mms_status cu_graph_compute(mms_backend_t backend, struct mms_cgraph *g) {
    struct cu_backend *cb = cu_of(backend);
    struct cu_graph_cache *c = cb->graphs;
    enum mms_status st = cu_set_device(cb->device);
    size_t need = 0, need_q8 = 0;
    bool moved = false;
    if (st != MMS_OK) return st;
    if (cb->use_graphs && mms_graph_unchanged(g)) {    // same kernels, arguments and scratch needs as its last compute
        for (int i = 0; i < CU_GRAPHS; i++) {
            cu_graph_entry *en = &c->entries[i];
            if (en->exec && en->graph_id == mms_graph_id(g)) {
                en->last_use = ++c->clock;
                cb->n_unchanged++;
                CU_TRY(cudaGraphLaunch(en->exec, cb->stream));
                return MMS_OK;
            }
        }
    }
    for (int i = 0; i < mms_graph_n_nodes(g); i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        const size_t n1 = cu_scratch_need(t), n2 = cu_q8_need(t);
        need = n1 > need ? n1 : need;
        need_q8 = n2 > need_q8 ? n2 : need_q8;
    }
    if ((st = cu_grow(cb, &cb->scratch, &cb->scratch_size, need, &moved)) != MMS_OK ||
        (st = cu_grow(cb, (void **)&cb->q8.area, &cb->q8_size, need_q8, &moved)) != MMS_OK) return st;
    if (moved) cu_graphs_clear(c);
    const int64_t t0 = cu_now_ns();
    if (!cb->use_graphs || !cu_signature(cb, g)) { cu_graphs_bind(c, mms_graph_id(g), NULL); return cu_run_graph(cb, g); }
    const int64_t t1 = cu_now_ns();
    const uint64_t key = cu_graph_key(g);
    cb->signature_us += (double)(t1 - t0) * 1e-3;
    cb->key_us += (double)(cu_now_ns() - t1) * 1e-3;
    for (int i = 0; i < CU_GRAPHS; i++) {
        cu_graph_entry *en = &c->entries[i];
        if (en->exec && en->key == key && en->size == c->size && memcmp(en->sig, c->sig, c->size) == 0) {
            en->last_use = ++c->clock;
            cu_graphs_bind(c, mms_graph_id(g), en);
            CU_TRY(cudaGraphLaunch(en->exec, cb->stream));
            return MMS_OK;
        }
    }
    cu_graphs_bind(c, mms_graph_id(g), NULL);
    for (int i = 0; i < c->n_recent; i++)
        if (c->recent[i] == key && cu_capture(cb, g, key)) return MMS_OK;
    c->recent[c->n_recent < CU_GRAPH_RECENT ? c->n_recent++ : (int)(c->clock++ % CU_GRAPH_RECENT)] = key;
    return cu_run_graph(cb, g);
}

static bool cu_tensor_on_device(const struct mms_tensor *t, int device) {
    return t->buffer && cu_buft_is_device(t->buffer->buft) && ((struct cu_buffer *)t->buffer->context)->device == device;
}

static enum mms_status cu_set_async(mms_backend_t backend, struct mms_tensor *t, const void *data, size_t off, size_t n) {
    struct cu_backend *cb = cu_of(backend);
    if (!cu_tensor_on_device(t, cb->device)) return mms_backend_tensor_set(t, data, off, n);
    enum mms_status st = cu_set_device(cb->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaMemcpyAsync((char *)t->data + off, data, n, cudaMemcpyHostToDevice, cb->stream));
    return MMS_OK;
}
static enum mms_status cu_get_async(mms_backend_t backend, const struct mms_tensor *t, void *data, size_t off, size_t n) {
    struct cu_backend *cb = cu_of(backend);
    if (!cu_tensor_on_device(t, cb->device)) return mms_backend_tensor_get(t, data, off, n);
    enum mms_status st = cu_set_device(cb->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaMemcpyAsync(data, (const char *)t->data + off, n, cudaMemcpyDeviceToHost, cb->stream));
    return MMS_OK;
}

static const char *cu_get_name(mms_backend_t b) { return cu_of(b)->name; }

// Device to device between two CUDA backends: queued on the source's stream (after its work), and
// the destination's stream waits for it. Anything else falls back to a synchronous copy.
static enum mms_status cu_cpy_async(mms_backend_t bs, mms_backend_t bd, const struct mms_tensor *src, struct mms_tensor *dst) {
    if (mms_backend_is_cuda(bd) && !mms_backend_is_cuda(bs) && src->buffer && mms_backend_buffer_is_host(src->buffer) &&
        cu_tensor_on_device(dst, cu_of(bd)->device)) {
        // host memory (a synchronous backend's, or set by the caller: complete now) to this device,
        // on its stream: the graph's inputs go in order with its kernels, without waiting for it.
        // From pageable memory the runtime stages the bytes before the call returns, so the source
        // may change at once; from pinned memory it reads them when the stream gets there, so the
        // source must keep them until then (the scheduler's compute memory does, until the
        // graph is synchronized and the next one allocated)
        enum mms_status st = cu_set_device(cu_of(bd)->device);
        if (st != MMS_OK) return st;
        CU_TRY(cudaMemcpyAsync(dst->data, src->data, mms_nbytes(src), cudaMemcpyHostToDevice, cu_of(bd)->stream));
        return MMS_OK;
    }
    if (!mms_backend_is_cuda(bs) || !mms_backend_is_cuda(bd)) return MMS_ERR_UNSUPPORTED;
    struct cu_backend *s = cu_of(bs), *d = cu_of(bd);
    if (!cu_tensor_on_device(src, s->device) || !cu_tensor_on_device(dst, d->device)) return MMS_ERR_UNSUPPORTED;
    cu_enable_peer(s->device, d->device);
    enum mms_status st = cu_set_device(s->device);
    if (st != MMS_OK) return st;
    if (s->device == d->device) CU_TRY(cudaMemcpyAsync(dst->data, src->data, mms_nbytes(src), cudaMemcpyDeviceToDevice, s->stream));
    else CU_TRY(cudaMemcpyPeerAsync(dst->data, d->device, src->data, s->device, mms_nbytes(src), s->stream));
    cudaEvent_t ev;
    CU_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CU_TRY(cudaEventRecord(ev, s->stream));
    CU_TRY(cudaStreamWaitEvent(d->stream, ev, 0));
    CU_TRY(cudaEventDestroy(ev));          // destroyed once complete; the wait holds its own reference
    return MMS_OK;
}

static mms_backend_event_t cu_event_new(mms_backend_t backend) {
    struct cu_backend *cb = cu_of(backend);
    cudaEvent_t ev;
    if (cu_set_device(cb->device) != MMS_OK) return NULL;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess) { cu_fail(e, "cudaEventCreateWithFlags", __LINE__); return NULL; }
    mms_backend_event_t out = (mms_backend_event_t)calloc(1, sizeof *out);
    if (!out) { cudaEventDestroy(ev); mms_set_error(MMS_ERR_OOM, "CUDA event: out of host memory"); return NULL; }
    out->backend = backend;
    out->context = (void *)ev;
    return out;
}
static void cu_event_free(mms_backend_event_t e) { cudaEventDestroy((cudaEvent_t)e->context); free(e); }
static enum mms_status cu_event_record(mms_backend_event_t e) {
    struct cu_backend *cb = cu_of(e->backend);
    enum mms_status st = cu_set_device(cb->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaEventRecord((cudaEvent_t)e->context, cb->stream));
    return MMS_OK;
}
static enum mms_status cu_event_sync(mms_backend_event_t e) {
    CU_TRY(cudaEventSynchronize((cudaEvent_t)e->context));
    return cu_check_fault(cu_of(e->backend));
}
static enum mms_status cu_event_wait(mms_backend_t backend, mms_backend_event_t e) {
    if (!mms_backend_is_cuda(backend)) return cu_event_sync(e);
    struct cu_backend *cb = cu_of(backend);
    enum mms_status st = cu_set_device(cb->device);
    if (st != MMS_OK) return st;
    CU_TRY(cudaStreamWaitEvent(cb->stream, (cudaEvent_t)e->context, 0));
    return MMS_OK;
}

static mms_backend_buffer_type_t cu_default_buft(mms_backend_t b) { return mms_backend_cuda_buffer_type(cu_of(b)->device); }
static bool cu_supports_buft(mms_backend_t b, mms_backend_buffer_type_t t) { return t == &cu_buft[cu_of(b)->device]; }

// Large batches are worth moving host weights to the GPU for (the copy costs less than the CPU's product).
#define CU_OFFLOAD_MIN_BATCH 32
static bool cu_offload_op(mms_backend_t b, const struct mms_tensor *t) {
    (void)b;
    return t->op == MMS_OP_MUL_MAT && t->src[1]->ne[1] >= CU_OFFLOAD_MIN_BATCH;
}

static void cu_free_state(struct cu_backend *cb) {
    cudaSetDevice(cb->device);
    if (cb->stream) cudaStreamSynchronize(cb->stream);
    cu_graphs_clear(cb->graphs);
    if (cb->graphs) free(cb->graphs->sig);
    free(cb->graphs);
    if (cb->scratch) cudaFree(cb->scratch);
    if (cb->q8.area) cudaFree(cb->q8.area);
    if (cb->cublas) cublasDestroy(cb->cublas);
    if (cb->cublas_workspace) cudaFree(cb->cublas_workspace);
    if (cb->stream) cudaStreamDestroy(cb->stream);
    if (cb->fault) cudaFreeHost(cb->fault);
    cudaGetLastError();
}

static void cu_free(mms_backend_t backend) {
    struct cu_backend *cb = cu_of(backend);
    cu_free_state(cb);
    free(cb);
    free(backend);
}

static const struct mms_backend_i cu_backend_iface = {
    cu_get_name, cu_free, cu_default_buft, cu_supports_op, cu_supports_buft, cu_offload_op,
    cu_graph_compute, cu_synchronize, cu_set_async, cu_get_async, cu_cpy_async,
    cu_event_new, cu_event_free, cu_event_record, cu_event_sync, cu_event_wait
};

// -- entry points --

int mms_backend_cuda_get_device_count(void) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        mms_set_error(MMS_ERR_UNSUPPORTED, "CUDA: no usable device: cudaGetDeviceCount: %s", cudaGetErrorString(err));
        cudaGetLastError();
        return 0;
    }
    return n;
}

static bool cu_check_device(int device, const char *who) {
    const int n = mms_backend_cuda_get_device_count();
    if (device >= CU_MAX_DEVICES && device < n) {
        mms_set_error(MMS_ERR_UNSUPPORTED, "%s: device %d: this build uses CUDA devices 0..%d of the %d present (build mmsched_cuda.cu with -DCU_MAX_DEVICES=%d for all)",
                      who, device, CU_MAX_DEVICES - 1, n, n);
        return false;
    }
    if (device >= 0 && device < n) return true;
    if (n > 0) mms_set_error(MMS_ERR_INVALID_ARG, "%s: device %d does not exist (%d CUDA device%s)", who, device, n, n == 1 ? "" : "s");
    else mms_set_error(MMS_ERR_UNSUPPORTED, "%s(%d): %s", who, device, mms_last_error());
    return false;
}

mms_backend_buffer_type_t mms_backend_cuda_buffer_type(int device) {
    if (!cu_check_device(device, "mms_backend_cuda_buffer_type")) return NULL;
    if (!cu_buft[device].iface.alloc_buffer) {
        cu_buft_ctx[device].device = device;
        snprintf(cu_buft_ctx[device].name, sizeof cu_buft_ctx[device].name, "CUDA%d", device);
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) cu_buft_ctx[device].total = prop.totalGlobalMem;
        cu_buft[device].iface.get_name = cu_buft_name;
        cu_buft[device].iface.get_alignment = cu_buft_align;
        cu_buft[device].iface.get_max_size = cu_buft_max_size;
        cu_buft[device].context = &cu_buft_ctx[device];
        cu_buft[device].iface.alloc_buffer = cu_buft_alloc;   // last: marks the entry initialised
    }
    return &cu_buft[device];
}

mms_backend_buffer_type_t mms_backend_cuda_host_buffer_type(void) {
    if (mms_backend_cuda_get_device_count() == 0) return NULL;
    if (!cu_host_buft.iface.alloc_buffer) {
        cu_host_buft.iface.get_name = cu_host_buft_name;
        cu_host_buft.iface.get_alignment = cu_host_buft_align;
        cu_host_buft.iface.is_host = cu_host_buft_is_host;
        cu_host_buft.iface.alloc_buffer = cu_host_buft_alloc;
    }
    return &cu_host_buft;
}

// cuBLAS's recommended workspace: 32 MiB on Hopper and later, 4 MiB before.
static size_t cu_cublas_workspace_size(int device) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) { cudaGetLastError(); major = 9; }
    return (size_t)(major >= 9 ? 32 : 4) << 20;
}

static enum mms_status cu_init_state(struct cu_backend *cb) {
    const size_t ws = cu_cublas_workspace_size(cb->device);
    cb->fuse = !getenv("MMS_CUDA_FUSE") || strcmp(getenv("MMS_CUDA_FUSE"), "0") != 0;
    cb->use_graphs = !getenv("MMS_CUDA_GRAPHS") || strcmp(getenv("MMS_CUDA_GRAPHS"), "0") != 0;
    if (!(cb->graphs = (struct cu_graph_cache *)calloc(1, sizeof *cb->graphs))) return mms_set_error(MMS_ERR_OOM, "CUDA: out of host memory");
    CU_TRY(cudaDeviceGetAttribute(&cb->cc_major, cudaDevAttrComputeCapabilityMajor, cb->device));
    CU_TRY(cudaSetDevice(cb->device));
    CU_TRY(cudaStreamCreate(&cb->stream));    // a blocking stream: plain cudaMemcpy waits for it
    CUBLAS_TRY(cublasCreate(&cb->cublas));
    CUBLAS_TRY(cublasSetStream(cb->cublas, cb->stream));
    CU_TRY(cudaMalloc(&cb->cublas_workspace, ws));
    CUBLAS_TRY(cublasSetWorkspace(cb->cublas, cb->cublas_workspace, ws));
    CU_TRY(cudaHostAlloc((void **)&cb->fault, sizeof *cb->fault, cudaHostAllocMapped));
    memset(cb->fault, 0, sizeof *cb->fault);
    CU_TRY(cudaHostGetDevicePointer((void **)&cb->fault_dev, cb->fault, 0));
    return MMS_OK;
}

mms_backend_t mms_backend_cuda_init(int device) {
    if (!cu_check_device(device, "mms_backend_cuda_init") || !mms_backend_cuda_buffer_type(device)) return NULL;
    mms_backend_t b = (mms_backend_t)calloc(1, sizeof *b);
    struct cu_backend *cb = (struct cu_backend *)calloc(1, sizeof *cb);
    if (!b || !cb) { free(b); free(cb); mms_set_error(MMS_ERR_OOM, "mms_backend_cuda_init: out of host memory"); return NULL; }
    cb->device = device;
    snprintf(cb->name, sizeof cb->name, "CUDA%d", device);
    if (cu_init_state(cb) != MMS_OK) {
        mms_set_error(mms_last_status(), "mms_backend_cuda_init(%d): %s", device, mms_last_error());
        cu_free_state(cb);
        free(cb);
        free(b);
        return NULL;
    }
    b->iface = cu_backend_iface;
    b->context = cb;
    return b;
}

bool mms_backend_is_cuda(mms_backend_t backend) {
    return backend && backend->iface.get_name == cu_get_name;
}
