/* >>threadpool ====================================================================================
   A pool of persistent workers for the CPU backend. The caller is worker 0. A job runs fn on every
   worker; inside a job, workers meet at barriers. Whoever waits spins a while (threads finishing a
   node apart are common: a matrix product's last tiles) and then sleeps on a condition variable, so
   a busy machine's scheduler can run the straggler on the waiter's core instead of watching it spin
   (build/bench measures a barrier). Between jobs, workers spin as long on the job counter
   (back-to-back graphs, as the scheduler's splits make, start at once) and then sleep too.
   How long to spin: longer than a sleeper takes to wake. On a virtual machine that is 0.1-1 ms
   (the host must run the vCPU); with a fixed 0.1 ms, two threads running back-to-back products of
   0.2 ms fell into a cycle where each woke the other late (build/bench's Q4_K 4096x4096 decode:
   0.53-0.57 ms instead of 0.17-0.25 in 4 of 20 runs). So each sleeper measures its wake-up, from the
   signal to running again, and the budget follows twice the longest seen lately, between
   MMS__POOL_SPIN_MIN_US and MMS__POOL_SPIN_MAX_US (a bare machine wakes in tens of microseconds
   and keeps the minimum). */

#define MMS__POOL_SPIN_MIN_US 100
#define MMS__POOL_SPIN_MAX_US 1000

struct mms__threadpool {
    int           n_threads;        /* workers including the caller */
    mms__thread  *threads;          /* n_threads - 1 */
    mms__mutex    mutex;
    mms__cond     cond;             /* a new job or stop */
    mms__cond     barrier_cond;     /* a barrier's phase changed */
    mms__atomic_int job_seq;        /* bumped for each job, under mutex; read while spinning */
    bool          stop;
    void        (*fn)(void *arg, int ith, int nth);
    void         *arg;
    mms__atomic_int barrier_count;
    mms__atomic_int barrier_phase;
    mms__atomic_int barrier_sleepers;
    mms__atomic_int signal_us;        /* when sleepers were last signalled (mms_time_us, low 32 bits) */
    mms__atomic_int spin_us;          /* the spin budget */
};

/* Spins until *v differs from old (true) or the budget is spent (false). */
static bool mms__threadpool_spin(struct mms__threadpool *pool, mms__atomic_int *v, int32_t old) {
    const int64_t t0 = mms_time_us(), budget = mms__atomic_load(&pool->spin_us);
    for (;;) {
        int64_t t;
        int i;
        for (i = 0; i < 64; i++) {   /* a clock read per 64 pauses (1.5 us on Zen 5) */
            if (mms__atomic_load(v) != old) return true;
            mms__cpu_relax();
        }
        t = mms_time_us() - t0;
        if (t < 0 || t >= budget) return false;   /* < 0: a clock that went back */
    }
}

static void mms__threadpool_signalled(struct mms__threadpool *pool) {
    mms__atomic_store(&pool->signal_us, (int32_t)(uint32_t)mms_time_us());
}

/* A sleeper is running again: the budget becomes twice its wake-up time where that is more, or
   decays by an eighth toward it (a wake-up that seems to come before its signal counts as instant). */
static void mms__threadpool_woke(struct mms__threadpool *pool) {
    const int32_t since = (int32_t)((uint32_t)mms_time_us() - (uint32_t)mms__atomic_load(&pool->signal_us));
    const int32_t wake = MMS__MIN(MMS__MAX(since, 0), MMS__POOL_SPIN_MAX_US);   /* 2 * wake cannot overflow */
    const int32_t old = mms__atomic_load(&pool->spin_us), budget = MMS__MAX(2 * wake, old - old / 8);
    mms__atomic_store(&pool->spin_us, MMS__MIN(MMS__MAX(budget, MMS__POOL_SPIN_MIN_US), MMS__POOL_SPIN_MAX_US));
}

struct mms__worker_arg { struct mms__threadpool *pool; int ith; };

static void mms__threadpool_barrier(struct mms__threadpool *pool) {
    int32_t phase;
    if (pool->n_threads == 1) return;
    phase = mms__atomic_load(&pool->barrier_phase);
    if (mms__atomic_fetch_add(&pool->barrier_count, 1) == pool->n_threads - 1) {
        mms__atomic_store(&pool->barrier_count, 0);
        mms__atomic_fetch_add(&pool->barrier_phase, 1);
        /* A sleeper counts itself before it checks the phase under the mutex; both steps here are
           read-modify-writes and loads in that order, so a sleeper is either seen or sees the phase. */
        if (mms__atomic_load(&pool->barrier_sleepers) > 0) {
            mms__mutex_lock(&pool->mutex);
            mms__threadpool_signalled(pool);
            mms__cond_broadcast(&pool->barrier_cond);
            mms__mutex_unlock(&pool->mutex);
        }
        return;
    }
    if (mms__threadpool_spin(pool, &pool->barrier_phase, phase)) return;
    mms__atomic_fetch_add(&pool->barrier_sleepers, 1);
    mms__mutex_lock(&pool->mutex);
    if (mms__atomic_load(&pool->barrier_phase) == phase) {
        do mms__cond_wait(&pool->barrier_cond, &pool->mutex); while (mms__atomic_load(&pool->barrier_phase) == phase);
        mms__threadpool_woke(pool);
    }
    mms__mutex_unlock(&pool->mutex);
    mms__atomic_fetch_add(&pool->barrier_sleepers, -1);
}

static void *mms__threadpool_worker(void *p) {
    struct mms__worker_arg *wa = (struct mms__worker_arg *)p;
    struct mms__threadpool *pool = wa->pool;
    int seen = 0;
    for (;;) {
        void (*fn)(void *, int, int);
        void *arg;
        mms__threadpool_spin(pool, &pool->job_seq, seen);
        mms__mutex_lock(&pool->mutex);
        if (!pool->stop && mms__atomic_load(&pool->job_seq) == seen) {
            do mms__cond_wait(&pool->cond, &pool->mutex); while (!pool->stop && mms__atomic_load(&pool->job_seq) == seen);
            if (!pool->stop) mms__threadpool_woke(pool);
        }
        if (pool->stop) { mms__mutex_unlock(&pool->mutex); break; }
        seen = mms__atomic_load(&pool->job_seq);
        fn = pool->fn;
        arg = pool->arg;
        mms__mutex_unlock(&pool->mutex);
        fn(arg, wa->ith, pool->n_threads);
        mms__threadpool_barrier(pool);   /* the job ends when every worker is done */
    }
    MMS_FREE(wa);
    return NULL;
}

static void mms__threadpool_free(struct mms__threadpool *pool) {
    int i;
    if (!pool) return;
    mms__mutex_lock(&pool->mutex);
    pool->stop = true;
    mms__cond_broadcast(&pool->cond);
    mms__mutex_unlock(&pool->mutex);
    for (i = 0; i < pool->n_threads - 1; i++) mms__thread_join(pool->threads[i]);
    mms__mutex_destroy(&pool->mutex);
    mms__cond_destroy(&pool->cond);
    mms__cond_destroy(&pool->barrier_cond);
    MMS_FREE(pool->threads);
    MMS_FREE(pool);
}

static struct mms__threadpool *mms__threadpool_new(int n_threads) {
    struct mms__threadpool *pool = (struct mms__threadpool *)MMS_MALLOC(sizeof *pool);
    int i;
    if (!pool) return NULL;
    memset(pool, 0, sizeof *pool);
    pool->n_threads = 1;
    mms__atomic_store(&pool->spin_us, MMS__POOL_SPIN_MIN_US);
    mms__mutex_init(&pool->mutex);
    mms__cond_init(&pool->cond);
    mms__cond_init(&pool->barrier_cond);
    pool->threads = (mms__thread *)MMS_MALLOC(sizeof(mms__thread) * (size_t)(n_threads > 1 ? n_threads - 1 : 1));
    if (!pool->threads) { mms__threadpool_free(pool); return NULL; }
    for (i = 1; i < n_threads; i++) {
        struct mms__worker_arg *wa = (struct mms__worker_arg *)MMS_MALLOC(sizeof *wa);
        if (!wa) break;
        wa->pool = pool;
        wa->ith = i;
        if (!mms__thread_create(&pool->threads[i - 1], mms__threadpool_worker, wa)) { MMS_FREE(wa); break; }
        pool->n_threads++;   /* only workers that started count */
    }
    if (pool->n_threads != n_threads) { mms__threadpool_free(pool); return NULL; }
    return pool;
}

/* Runs fn(arg, ith, n_threads) on every worker and returns when all are done. */
static void mms__threadpool_run(struct mms__threadpool *pool, void (*fn)(void *, int, int), void *arg) {
    if (pool->n_threads > 1) {
        mms__mutex_lock(&pool->mutex);
        pool->fn = fn;
        pool->arg = arg;
        mms__atomic_fetch_add(&pool->job_seq, 1);
        mms__threadpool_signalled(pool);
        mms__cond_broadcast(&pool->cond);
        mms__mutex_unlock(&pool->mutex);
    }
    fn(arg, 0, pool->n_threads);
    mms__threadpool_barrier(pool);
}
