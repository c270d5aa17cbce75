/* >>threadpool ====================================================================================
   A pool of persistent workers for the CPU backend. The caller is worker 0. A job runs fn on every
   worker; inside a job, workers meet at barriers. Whoever waits spins for about a tenth of a
   millisecond (threads finishing a node that far apart are common: a matrix product's last tiles)
   and then sleeps on a condition variable, so a busy machine's scheduler can run the straggler on
   the waiter's core instead of watching it spin (build/bench measures a barrier). Waking a sleeper
   costs more than that on a virtual machine, up to a millisecond when its host is busy (profiles of
   build/batch --bench: small element-wise nodes took 57 us with 6 us of spinning, 17 us with
   this). Between jobs, workers spin as long on the job
   counter (back-to-back graphs, as the scheduler's splits make, start at once) and then sleep too. */

#define MMS__POOL_SPINS 4096   /* pause instructions before sleeping: about 100 us on Zen 3 */

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
};

struct mms__worker_arg { struct mms__threadpool *pool; int ith; };

static void mms__threadpool_barrier(struct mms__threadpool *pool) {
    int32_t phase;
    int spins;
    if (pool->n_threads == 1) return;
    phase = mms__atomic_load(&pool->barrier_phase);
    if (mms__atomic_fetch_add(&pool->barrier_count, 1) == pool->n_threads - 1) {
        mms__atomic_store(&pool->barrier_count, 0);
        mms__atomic_fetch_add(&pool->barrier_phase, 1);
        /* A sleeper counts itself before it checks the phase under the mutex; both steps here are
           read-modify-writes and loads in that order, so a sleeper is either seen or sees the phase. */
        if (mms__atomic_load(&pool->barrier_sleepers) > 0) {
            mms__mutex_lock(&pool->mutex);
            mms__cond_broadcast(&pool->barrier_cond);
            mms__mutex_unlock(&pool->mutex);
        }
        return;
    }
    for (spins = 0; spins < MMS__POOL_SPINS; spins++) {
        if (mms__atomic_load(&pool->barrier_phase) != phase) return;
        mms__cpu_relax();
    }
    mms__atomic_fetch_add(&pool->barrier_sleepers, 1);
    mms__mutex_lock(&pool->mutex);
    while (mms__atomic_load(&pool->barrier_phase) == phase) mms__cond_wait(&pool->barrier_cond, &pool->mutex);
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
        int spins;
        for (spins = 0; spins < MMS__POOL_SPINS && mms__atomic_load(&pool->job_seq) == seen; spins++) mms__cpu_relax();
        mms__mutex_lock(&pool->mutex);
        while (!pool->stop && mms__atomic_load(&pool->job_seq) == seen) mms__cond_wait(&pool->cond, &pool->mutex);
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
        mms__cond_broadcast(&pool->cond);
        mms__mutex_unlock(&pool->mutex);
    }
    fn(arg, 0, pool->n_threads);
    mms__threadpool_barrier(pool);
}
