/* >>platform ======================================================================================
   The only platform-specific code: threads, atomics, clocks, aligned memory, files and CPU
   features, for POSIX (Linux, macOS) and Windows (MinGW-w64; MSVC by the same Win32 calls). Paths
   are UTF-8 everywhere: on Windows they are converted to UTF-16 for the wide API. Everything else
   in the library is standard C. */

#if defined(_WIN32)
#  ifndef WIN32_LEAN_AND_MEAN
#    define WIN32_LEAN_AND_MEAN
#  endif
#  ifndef NOMINMAX
#    define NOMINMAX
#  endif
#  include <windows.h>
#  include <process.h>
#  include <errno.h>
#  if defined(_MSC_VER) && !defined(__clang__)
#    include <intrin.h>
#  endif
#else
#  include <pthread.h>
#  include <sched.h>
#  include <time.h>
#  include <unistd.h>
#  include <fcntl.h>
#  include <errno.h>
#  include <sys/mman.h>
#  include <sys/stat.h>
#  include <sys/time.h>
#endif
#if MMS__HAVE_AVX2
#  include <cpuid.h>
#endif
#if MMS__HAVE_NEON && defined(__linux__)
#  include <sys/auxv.h>
#endif

/* -- atomics: loads acquire, stores release, read-modify-writes acquire-release, counters relaxed -- */
#if defined(_MSC_VER) && !defined(__clang__)
typedef struct { volatile long v; } mms__atomic_int;   /* long is 32 bits on Windows */
static int32_t mms__atomic_load(mms__atomic_int *a)               { return (int32_t)_InterlockedOr(&a->v, 0); }
static void    mms__atomic_store(mms__atomic_int *a, int32_t x)   { _InterlockedExchange(&a->v, (long)x); }
static int32_t mms__atomic_fetch_add(mms__atomic_int *a, int32_t x) { return (int32_t)_InterlockedExchangeAdd(&a->v, (long)x); }
static uint64_t mms__atomic_next_u64(volatile uint64_t *counter)  { return (uint64_t)_InterlockedIncrement64((volatile __int64 *)counter); }
/* 64-bit words handed over between threads: sequentially consistent */
typedef struct { volatile __int64 v; } mms__atomic_i64;
static int64_t mms__atomic_load64(mms__atomic_i64 *a)             { return (int64_t)_InterlockedOr64(&a->v, 0); }
static void    mms__atomic_exchange64(mms__atomic_i64 *a, int64_t x) { _InterlockedExchange64(&a->v, (__int64)x); }
static bool    mms__atomic_cas64(mms__atomic_i64 *a, int64_t old, int64_t x) {
    return _InterlockedCompareExchange64(&a->v, (__int64)x, (__int64)old) == (__int64)old;
}
#else
typedef struct { volatile int32_t v; } mms__atomic_int;
static int32_t mms__atomic_load(mms__atomic_int *a)               { return __atomic_load_n(&a->v, __ATOMIC_ACQUIRE); }
static void    mms__atomic_store(mms__atomic_int *a, int32_t x)   { __atomic_store_n(&a->v, x, __ATOMIC_RELEASE); }
static int32_t mms__atomic_fetch_add(mms__atomic_int *a, int32_t x) { return __atomic_fetch_add(&a->v, x, __ATOMIC_ACQ_REL); }
static uint64_t mms__atomic_next_u64(volatile uint64_t *counter)  { return __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED); }
/* 64-bit words handed over between threads: sequentially consistent */
typedef struct { volatile int64_t v; } mms__atomic_i64;
static int64_t mms__atomic_load64(mms__atomic_i64 *a)             { return __atomic_load_n(&a->v, __ATOMIC_SEQ_CST); }
static void    mms__atomic_exchange64(mms__atomic_i64 *a, int64_t x) { (void)__atomic_exchange_n(&a->v, x, __ATOMIC_SEQ_CST); }
static bool    mms__atomic_cas64(mms__atomic_i64 *a, int64_t old, int64_t x) {
    return __atomic_compare_exchange_n(&a->v, &old, x, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
#endif

static void mms__cpu_relax(void) {
#if defined(_MSC_VER) && !defined(__clang__)
    YieldProcessor();
#elif defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#if defined(_WIN32)
MMS__MAYBE_UNUSED static void mms__thread_yield(void) { SwitchToThread(); }

/* -- threads (through the C runtime, so it is set up for them), SRW locks, condition variables -- */
typedef HANDLE             mms__thread;
typedef SRWLOCK            mms__mutex;
typedef CONDITION_VARIABLE mms__cond;

struct mms__thread_start { void *(*fn)(void *); void *arg; };
static unsigned __stdcall mms__thread_main(void *p) {
    struct mms__thread_start s = *(struct mms__thread_start *)p;
    MMS_FREE(p);
    s.fn(s.arg);
    return 0;
}
static bool mms__thread_create(mms__thread *t, void *(*fn)(void *), void *arg) {
    struct mms__thread_start *s = (struct mms__thread_start *)MMS_MALLOC(sizeof *s);
    uintptr_t h;
    if (!s) return false;
    s->fn = fn;
    s->arg = arg;
    h = _beginthreadex(NULL, 0, mms__thread_main, s, 0, NULL);
    if (!h) { MMS_FREE(s); return false; }
    *t = (HANDLE)h;
    return true;
}
static void mms__thread_join(mms__thread t)      { WaitForSingleObject(t, INFINITE); CloseHandle(t); }
static void mms__mutex_init(mms__mutex *m)       { InitializeSRWLock(m); }
static void mms__mutex_destroy(mms__mutex *m)    { MMS__UNUSED(m); }
static void mms__mutex_lock(mms__mutex *m)       { AcquireSRWLockExclusive(m); }
static void mms__mutex_unlock(mms__mutex *m)     { ReleaseSRWLockExclusive(m); }
static void mms__cond_init(mms__cond *c)         { InitializeConditionVariable(c); }
static void mms__cond_destroy(mms__cond *c)      { MMS__UNUSED(c); }
static void mms__cond_wait(mms__cond *c, mms__mutex *m) { SleepConditionVariableSRW(c, m, INFINITE, 0); }
static void mms__cond_broadcast(mms__cond *c)    { WakeAllConditionVariable(c); }
static void mms__cond_signal(mms__cond *c)       { WakeConditionVariable(c); }
/* Waits at most ms milliseconds; callers check their condition again (a wake-up may come early). */
MMS__MAYBE_UNUSED static void mms__cond_wait_ms(mms__cond *c, mms__mutex *m, int ms) { SleepConditionVariableSRW(c, m, (DWORD)ms, 0); }

static SRWLOCK mms__global_mutex = SRWLOCK_INIT;
static void mms__global_lock(void)   { AcquireSRWLockExclusive(&mms__global_mutex); }
static void mms__global_unlock(void) { ReleaseSRWLockExclusive(&mms__global_mutex); }

/* The performance counter, split so that counts times 10^6 cannot overflow. */
MMS_API int64_t mms_time_us(void) {
    LARGE_INTEGER count, freq;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&freq);
    return count.QuadPart / freq.QuadPart * 1000000 + count.QuadPart % freq.QuadPart * 1000000 / freq.QuadPart;
}

/* The calling thread's CPU time in nanoseconds; -1: no clock fine enough (GetThreadTimes counts in scheduler
   ticks, far coarser than the pool's jobs). */
MMS__MAYBE_UNUSED static int64_t mms__thread_cpu_ns(void) { return -1; }

MMS_API int mms_cpu_count(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
}
#else
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
static void mms__cond_signal(mms__cond *c)       { pthread_cond_signal(c); }
/* Waits at most ms milliseconds; callers check their condition again (a wake-up may come early).
   The deadline is on the realtime clock, the condition variable's default. */
MMS__MAYBE_UNUSED static void mms__cond_wait_ms(mms__cond *c, mms__mutex *m, int ms) {
    struct timeval now;
    struct timespec until;
    gettimeofday(&now, NULL);
    until.tv_sec = now.tv_sec + ms / 1000;
    until.tv_nsec = (long)now.tv_usec * 1000 + (long)(ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) { until.tv_sec++; until.tv_nsec -= 1000000000; }
    pthread_cond_timedwait(c, m, &until);
}

/* A process-wide mutex for the few global tables (live buffers, log settings). */
static pthread_mutex_t mms__global_mutex = PTHREAD_MUTEX_INITIALIZER;
static void mms__global_lock(void)   { pthread_mutex_lock(&mms__global_mutex); }
static void mms__global_unlock(void) { pthread_mutex_unlock(&mms__global_mutex); }

/* clock_gettime and its clocks are declared only outside strict ISO C (-std=c99 hides them, the way
   this library's own objects are built): without this the pool would lose its thread clock and the
   monotonic one. Their Linux values are the same on every architecture; clockid_t is an int. */
#if defined(__linux__) && !defined(CLOCK_MONOTONIC)
extern int clock_gettime(int clock_id, struct timespec *tp);
#  define CLOCK_MONOTONIC 1
#  define CLOCK_THREAD_CPUTIME_ID 3
#endif

/* The calling thread's CPU time in nanoseconds; -1 where the headers expose no per-thread clock. */
MMS__MAYBE_UNUSED static int64_t mms__thread_cpu_ns(void) {
#ifdef CLOCK_THREAD_CPUTIME_ID
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
#else
    return -1;
#endif
}

/* A monotonic clock where there is one (Linux always, above); other systems' strict C99 builds
   without POSIX feature macros fall back to gettimeofday. */
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
#endif

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
/* madvise and its flags are declared only outside strict ISO C (-std=c99 hides them); their Linux
   values are the same on x86-64 and AArch64. */
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__)) && !defined(MADV_DONTNEED)
extern int madvise(void *addr, size_t length, int advice);
#  define MADV_DONTNEED 4
#  define MADV_HUGEPAGE 14
#endif

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
/* Tells the kernel the whole pages inside [p, p + size) of a read-only file mapping will not be
   read again (their contents were copied elsewhere): they leave the process's resident memory and
   stay in the page cache. Nothing on systems without madvise. */
MMS__MAYBE_UNUSED static void mms__release_pages(const void *p, size_t size) {
#if defined(MADV_DONTNEED)
    const uintptr_t page = 4096, lo = MMS__ALIGN_UP((uintptr_t)p, page), hi = ((uintptr_t)p + size) / page * page;
    if (hi > lo) (void)madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED);
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

/* -- files: fopen with a UTF-8 path, always in binary mode (files written on Windows keep LF line
   ends), and read-only mappings of model files -- */
struct mms__mapping { void *addr; size_t size; };

#if defined(_WIN32)
/* path as a new UTF-16 string (free with MMS_FREE); NULL if it is not valid UTF-8 */
static wchar_t *mms__utf8_to_wide(const char *path) {
    const int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
    wchar_t *w = n > 0 ? (wchar_t *)MMS_MALLOC((size_t)n * sizeof(wchar_t)) : NULL;
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, n) != n) { MMS_FREE(w); w = NULL; }
    return w;
}

/* The system's message for a Win32 error code, without the trailing CR LF it comes with. */
static const char *mms__win_error(DWORD code, char *buf, size_t size) {
    size_t n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code, 0, buf, (DWORD)size, NULL);
    if (n == 0) snprintf(buf, size, "Windows error %lu", (unsigned long)code);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '.')) buf[--n] = '\0';
    return buf;
}

MMS__MAYBE_UNUSED static FILE *mms__fopen(const char *path, const char *mode) {
    wchar_t *wpath = mms__utf8_to_wide(path), wmode[8];
    FILE *f = NULL;
    size_t i, n = 0;
    for (i = 0; mode[i] && n < 6; i++) if (mode[i] != 'b') wmode[n++] = (wchar_t)mode[i];
    wmode[n++] = L'b';
    wmode[n] = L'\0';
    if (wpath) f = _wfopen(wpath, wmode);
    else errno = EINVAL;
    MMS_FREE(wpath);
    return f;
}

MMS__MAYBE_UNUSED static enum mms_status mms__map_file(const char *path, struct mms__mapping *out) {
    wchar_t *wpath = mms__utf8_to_wide(path);
    HANDLE file, mapping;
    LARGE_INTEGER size;
    char why[256];
    out->addr = NULL;
    out->size = 0;
    if (!wpath) return mms_set_error(MMS_ERR_IO, "cannot open '%s': the path is not valid UTF-8", path);
    file = CreateFileW(wpath, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    MMS_FREE(wpath);
    if (file == INVALID_HANDLE_VALUE) return mms_set_error(MMS_ERR_IO, "cannot open '%s': %s", path, mms__win_error(GetLastError(), why, sizeof why));
    if (GetFileType(file) != FILE_TYPE_DISK || !GetFileSizeEx(file, &size) || (uint64_t)size.QuadPart > (uint64_t)SIZE_MAX) {
        CloseHandle(file);
        return mms_set_error(MMS_ERR_IO, "'%s' is not a regular file", path);
    }
    out->size = (size_t)size.QuadPart;
    if (out->size > 0) {   /* an empty file cannot be mapped */
        mapping = CreateFileMappingW(file, NULL, PAGE_READONLY, 0, 0, NULL);
        out->addr = mapping ? MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0) : NULL;
        if (!out->addr) {
            const DWORD err = GetLastError();
            if (mapping) CloseHandle(mapping);
            CloseHandle(file);
            out->size = 0;
            return mms_set_error(MMS_ERR_IO, "cannot map '%s': %s", path, mms__win_error(err, why, sizeof why));
        }
        CloseHandle(mapping);   /* the view keeps the mapping alive */
    }
    CloseHandle(file);
    return MMS_OK;
}

MMS__MAYBE_UNUSED static void mms__unmap_file(struct mms__mapping *m) {
    if (m->addr) UnmapViewOfFile(m->addr);
    m->addr = NULL;
    m->size = 0;
}

MMS__MAYBE_UNUSED static bool mms__is_dir(const char *path) {
    wchar_t *wpath = mms__utf8_to_wide(path);
    const DWORD attributes = wpath ? GetFileAttributesW(wpath) : INVALID_FILE_ATTRIBUTES;
    MMS_FREE(wpath);
    return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY);
}
#else
MMS__MAYBE_UNUSED static FILE *mms__fopen(const char *path, const char *mode) { return fopen(path, mode); }

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

MMS__MAYBE_UNUSED static bool mms__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
#endif

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

/* AVX-512 F, BW, DQ and VL with VNNI and BF16, and the OS saving the opmask and all 32 zmm registers
   (XCR0 bits 5-7 with the XMM/YMM ones). */
static bool mms__cpu_detect_avx512(void) {
#if MMS__HAVE_AVX2
    unsigned a, b, c, d, xcr0_lo;
    if (!mms__cpu_detect_avx2()) return false;
    __asm__ __volatile__("xgetbv" : "=a"(xcr0_lo) : "c"(0) : "edx");
    if ((xcr0_lo & 0xe6) != 0xe6) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!((b >> 16) & 1 && (b >> 17) & 1 && (b >> 30) & 1 && (b >> 31) & 1)) return false;   /* F, DQ, BW, VL */
    if (!((c >> 11) & 1)) return false;                                                     /* VNNI */
    if (a < 1 || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 5) & 1;                                                                    /* BF16 */
#else
    return false;
#endif
}

/* -- CPU features: ARM's dot-product instructions (Linux reports them in the auxiliary vector;
   elsewhere only a build that targets them assumes them) -- */
static bool mms__cpu_detect_dotprod(void) {
#if MMS__HAVE_NEON && defined(__ARM_FEATURE_DOTPROD)
    return true;
#elif MMS__HAVE_NEON && defined(__linux__)
    return (getauxval(AT_HWCAP) >> 20) & 1;   /* HWCAP_ASIMDDP */
#else
    return false;
#endif
}
