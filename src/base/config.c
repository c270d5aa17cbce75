/* >>impl ==========================================================================================
   Everything below is compiled only in the one translation unit that defines MMSCHED_IMPLEMENTATION.
   The inner guard lets that unit include the header more than once; the Makefile defines it on the
   command line to link test programs against one separately compiled implementation. */
#if defined(MMSCHED_IMPLEMENTATION) && !defined(MMSCHED_IMPL_INCLUDED)
#define MMSCHED_IMPL_INCLUDED

/* Allocator override: all three or none. */
#if defined(MMS_MALLOC) || defined(MMS_REALLOC) || defined(MMS_FREE)
#  if !defined(MMS_MALLOC) || !defined(MMS_REALLOC) || !defined(MMS_FREE)
#    error "mmsched: define all of MMS_MALLOC, MMS_REALLOC and MMS_FREE, or none"
#  endif
#else
#  define MMS_MALLOC(size)       malloc(size)
#  define MMS_REALLOC(ptr, size) realloc(ptr, size)
#  define MMS_FREE(ptr)          free(ptr)
#endif

#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <float.h>
#include <assert.h>
#include <ctype.h>
#include <limits.h>

#ifndef MMS_ASSERT
#  define MMS_ASSERT(cond) assert(cond)
#endif

/* Internal invariants that must hold even in release builds: a failure is a bug in mmsched. */
#define MMS__CHECK(cond) \
    do { if (!(cond)) mms__abort(__FILE__, __LINE__, "internal check failed: %s", #cond); } while (0)

#define MMS__MIN(a, b) ((a) < (b) ? (a) : (b))
#define MMS__MAX(a, b) ((a) > (b) ? (a) : (b))
#define MMS__ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define MMS__UNUSED(x) ((void)(x))
/* Unroll the next loop n times where the compiler takes the hint (gcc, clang; not nvcc's front end,
   which compiles this file too when a .cu defines MMSCHED_IMPLEMENTATION). */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#  define MMS__UNROLL4 _Pragma("GCC unroll 4")
#  define MMS__UNROLL8 _Pragma("GCC unroll 8")
#  define MMS__NO_UNROLL _Pragma("GCC unroll 1")   /* where unrolling spills registers */
#else
#  define MMS__UNROLL4
#  define MMS__UNROLL8
#  define MMS__NO_UNROLL
#endif
/* Around AVX-512 code: gcc's C++ front end (12) reports the intrinsics' own undefined pass-through
   operands (_mm512_undefined_ps in _mm512_cvtph_ps and others) as used uninitialised once inlined. */
#if defined(__GNUC__) && !defined(__clang__)
#  define MMS__AVX512_CODE_BEGIN _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
                                 _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#  define MMS__AVX512_CODE_END _Pragma("GCC diagnostic pop")
#else
#  define MMS__AVX512_CODE_BEGIN
#  define MMS__AVX512_CODE_END
#endif

#if defined(__GNUC__) || defined(__clang__)
#  define MMS__NORETURN __attribute__((noreturn))
#  define MMS__MAYBE_UNUSED __attribute__((unused))
#  define MMS__THREAD_LOCAL __thread
#  define MMS__LIKELY(x) __builtin_expect(!!(x), 1)
#elif defined(_MSC_VER)
#  define MMS__NORETURN __declspec(noreturn)
#  define MMS__MAYBE_UNUSED
#  define MMS__THREAD_LOCAL __declspec(thread)
#  define MMS__LIKELY(x) (x)
#else
#  define MMS__NORETURN
#  define MMS__MAYBE_UNUSED
#  define MMS__THREAD_LOCAL _Thread_local
#  define MMS__LIKELY(x) (x)
#endif

/* The SIMD kernels are compiled with per-function target attributes where the baseline lacks them
   and chosen at run time, so one binary built for plain x86-64 (or ARMv8.0) runs everywhere.
   MMS_NO_SIMD leaves them out; other compilers (MSVC) get the scalar kernels. */
#if !defined(MMS_NO_SIMD) && (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#  define MMS__HAVE_AVX2 1
#  include <immintrin.h>
#  define MMS__TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#  define MMS__TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512bf16")))
/* v is computed here and held in a vector register (an empty asm the compiler cannot see into):
   against folding a load into every use, or deferring a sum until many terms are live. */
#  define MMS__KEEP_IN_REG(v) __asm__("" : "+v"(v))
#else
#  define MMS__HAVE_AVX2 0
#endif

/* 64-bit ARM: NEON is part of the base ISA; the dot-product instructions (ARMv8.2 dotprod) are
   enabled per function and used only where the CPU reports them. */
#if !defined(MMS_NO_SIMD) && defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#  define MMS__HAVE_NEON 1
#  include <arm_neon.h>
#  if defined(__ARM_FEATURE_DOTPROD)
#    define MMS__TARGET_DOTPROD
#  elif defined(__clang__)
#    define MMS__TARGET_DOTPROD __attribute__((target("dotprod")))
#  else
#    define MMS__TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#  endif
#else
#  define MMS__HAVE_NEON 0
#endif

static MMS__NORETURN void mms__abort(const char *file, int line, const char *fmt, ...) MMS_PRINTF(3, 4);
