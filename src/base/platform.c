/* >>platform ======================================================================================
   The only platform-specific code: threads, atomics, clocks, aligned memory, file mapping and CPU
   features. Everything else is standard C. This section targets POSIX with gcc or clang; a Windows
   port replaces the bodies here (CreateThread, SRWLOCK, VirtualAlloc, MapViewOfFile, __cpuid). */

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#if MMS__HAVE_AVX2
#  include <cpuid.h>
#endif

/* -- atomics: loads acquire, stores release, read-modify-writes acquire-release, counters relaxed -- */
typedef struct { volatile int32_t v; } mms__atomic_int;
static int32_t mms__atomic_load(mms__atomic_int *a)               { return __atomic_load_n(&a->v, __ATOMIC_ACQUIRE); }
static void    mms__atomic_store(mms__atomic_int *a, int32_t x)   { __atomic_store_n(&a->v, x, __ATOMIC_RELEASE); }
static int32_t mms__atomic_fetch_add(mms__atomic_int *a, int32_t x) { return __atomic_fetch_add(&a->v, x, __ATOMIC_ACQ_REL); }
static uint64_t mms__atomic_next_u64(volatile uint64_t *counter)  { return __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED); }

static void mms__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

MMS__MAYBE_UNUSED static void mms__thread_yield(void) { sched_yield(); }

/* -- threads, mutexes, condition variables -- */
typedef pthread_t       mms__thread;
typedef pthread_mutex_t mms__mutex;
typedef pthread_cond_t  mms__cond;

static bool mms__thread_create(mms__thread *t, void *(*fn)(void *), void *arg) { return pthread_create(t, NULL, fn, arg) == 0; }
static void mms__thread_join(mms__thread t)      { pthread_join(t, NULL); }
static void mms__mutex_init(mms__mutex *m)       { pthread_mutex_init(m, NULL); }
static void mms__mutex_destroy(mms__mutex *m)    { pthread_mutex_destroy(m); }
static void mms__mutex_lock(mms__mutex *m)       { pthread_mutex_lock(m); }
static void mms__mutex_unlock(mms__mutex *m)     { pthread_mutex_unlock(m); }
static void mms__cond_init(mms__cond *c)         { pthread_cond_init(c, NULL); }
static void mms__cond_destroy(mms__cond *c)      { pthread_cond_destroy(c); }
static void mms__cond_wait(mms__cond *c, mms__mutex *m) { pthread_cond_wait(c, m); }
static void mms__cond_broadcast(mms__cond *c)    { pthread_cond_broadcast(c); }

/* A process-wide mutex for the few global tables (live buffers, log settings). */
static pthread_mutex_t mms__global_mutex = PTHREAD_MUTEX_INITIALIZER;
static void mms__global_lock(void)   { pthread_mutex_lock(&mms__global_mutex); }
static void mms__global_unlock(void) { pthread_mutex_unlock(&mms__global_mutex); }

/* A monotonic clock when the headers expose one; strict C99 builds without POSIX feature macros
   fall back to gettimeofday. */
MMS_API int64_t mms_time_us(void) {
#ifdef CLOCK_MONOTONIC
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + (int64_t)ts.tv_nsec / 1000;
#else
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + (int64_t)tv.tv_usec;
#endif
}

MMS_API int mms_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* -- aligned host memory: over-allocate and keep the original pointer just below the block, so it
   needs nothing beyond malloc (alignment is a power of two, at least sizeof(void *)) -- */
static void *mms__aligned_alloc(size_t alignment, size_t size) {
    char *raw, *p;
    if (size > SIZE_MAX - alignment - sizeof(void *)) return NULL;
    raw = (char *)MMS_MALLOC(size + alignment + sizeof(void *));
    if (!raw) return NULL;
    p = (char *)MMS__ALIGN_UP((uintptr_t)(raw + sizeof(void *)), (uintptr_t)alignment);
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    return p;
}
/* Asks the kernel to back [p, p + size) with transparent huge pages where it can (Linux with THP
   in "madvise" mode): large tensors read with big strides then miss the TLB far less. */
MMS__MAYBE_UNUSED static void mms__advise_huge_pages(void *p, size_t size) {
#if defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20, lo = MMS__ALIGN_UP((uintptr_t)p, huge), hi = ((uintptr_t)p + size) / huge * huge;
    if (hi > lo) (void)madvise((void *)lo, (size_t)(hi - lo), MADV_HUGEPAGE);
#else
    MMS__UNUSED(p);
    MMS__UNUSED(size);
#endif
}
static void mms__aligned_free(void *p) {
    char *raw;
    if (!p) return;
    memcpy(&raw, (char *)p - sizeof(void *), sizeof raw);
    MMS_FREE(raw);
}

/* -- read-only file mapping, for model files -- */
struct mms__mapping { void *addr; size_t size; };

MMS__MAYBE_UNUSED static enum mms_status mms__map_file(const char *path, struct mms__mapping *out) {
    int fd;
    struct stat st;
    out->addr = NULL;
    out->size = 0;
    fd = open(path, O_RDONLY);
    if (fd < 0) return mms_set_error(MMS_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mms_set_error(MMS_ERR_IO, "'%s' is not a regular file", path);
    }
    out->size = (size_t)st.st_size;
    if (out->size > 0) {
        void *addr = mmap(NULL, out->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr == MAP_FAILED) {
            const int err = errno;
            close(fd);
            return mms_set_error(MMS_ERR_IO, "cannot map '%s' (%zu bytes): %s", path, out->size, strerror(err));
        }
        out->addr = addr;
    }
    close(fd);
    return MMS_OK;
}

MMS__MAYBE_UNUSED static void mms__unmap_file(struct mms__mapping *m) {
    if (m->addr) munmap(m->addr, m->size);
    m->addr = NULL;
    m->size = 0;
}

/* -- CPU features: AVX2, FMA and F16C, with the OS saving the AVX state -- */
static bool mms__cpu_detect_avx2(void) {
#if MMS__HAVE_AVX2
    unsigned a, b, c, d, xcr0_lo;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    {
        bool fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
        if (!(fma && osxsave && avx && f16c)) return false;
    }
    __asm__ __volatile__("xgetbv" : "=a"(xcr0_lo) : "c"(0) : "edx");   /* the high half is not needed */
    if ((xcr0_lo & 6) != 6) return false;  /* XMM and YMM state enabled */
    if (__get_cpuid_max(0, NULL) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1;
#else
    return false;
#endif
}
