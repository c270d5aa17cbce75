/* >>threadpool ====================================================================================
   A pool of persistent helpers for the CPU backend. The caller runs a job of n parts,
   fn(arg, part, n_parts, worker), and takes parts itself; helpers that are running take parts
   too. Parts are handed out through one claim word (the job's epoch and the parts left, a
   compare-and-swap per part), so the caller never waits for a helper that holds no part: on a
   busy machine a helper whose core went to another program is not waited for, it finds no part
   left when it runs again. The caller waits only for parts a helper took and has not finished.
   (A barrier of all threads, as this pool had before, made every node wait for the slowest
   thread to be scheduled: with other programs running, graphs of many small nodes ran far
   slower with two threads than with one; manual section 9.)

   Waiting, for a helper between jobs and for the caller waiting for parts: spin a little, then
   yield the core between looks (a waiter on a shared core then lets the thread it waits for, or
   another program, run), then sleep on a condition variable. How long before sleeping: longer
   than a sleeper takes to wake. On a virtual machine that can be longer than MMS__POOL_SPIN_MIN_US
   (the host must run the vCPU); with that budget fixed, two threads running back-to-back products
   fell into a cycle where each woke the other late (docs/measurements.md). So each sleeper
   measures its wake-up, from the signal to running again, and the budget follows twice the
   longest seen lately, between MMS__POOL_SPIN_MIN_US and MMS__POOL_SPIN_MAX_US (a bare machine
   wakes sooner than the minimum and keeps it).

   What the caller learns of each job decides which nodes are worth splitting
   (mms__threadpool_worth): the share of the parts the helpers took and the time the split cost
   the caller beyond its own parts (handing out, waking sleepers, waiting for the helpers' parts).
   A node of one thread's time T gains T * share and pays that cost: split when the gain is more.
   On an idle machine the helpers take their share and the cost is microseconds, so nodes of a
   few microseconds are split; when other programs hold the cores, helpers come late or not at
   all and only long nodes are. Without splits nothing is learnt, so the learnt cost fades with
   time (MMS__POOL_FORGET_US) and short nodes are tried again.

   The share alone is not enough when this program gets fewer cores than it has threads (another
   program's load in another session: the scheduler gives each session its share, and this one's
   threads then take turns on about one core). The helpers still take their parts, but while they
   run the caller does not: its own parts take longer by as much as the helpers saved. So the
   caller also learns the rate at which it ran during its parts (its thread's CPU time over the
   wall time; sampled, as the clock costs a system call) and counts only what the split saved
   beyond that slowdown: of work T, its own part (1 - share) T took (1 - share) T / rate, so a
   split gains T (1 - (1 - share) / rate), nothing at a half share and half rate. A platform
   without a fine thread clock keeps the rate at 1 (the share alone). The rate too fades toward 1
   without splits, so a machine that became free is noticed. */

#define MMS__POOL_SPIN_MIN_US  100
#define MMS__POOL_SPIN_MAX_US  1000
#define MMS__POOL_PURE_SPINS   64       /* pauses before a waiter starts yielding its core between looks */
#define MMS__POOL_PARTS_BITS   24       /* the claim word: epoch << 24 | parts left */
#define MMS__POOL_FORGET_US    20000    /* the learnt split cost halves after this long without a split */
#define MMS__POOL_LEARN        0.125f   /* weight of the newest job in the running averages */
#define MMS__POOL_SPLIT_MIN_US 1.0f     /* a split costs at least this: the clock's tick hides less, and handing out is never free */
#define MMS__POOL_RATE_EVERY   8        /* while the caller ran at full rate lately, its rate is sampled every this many jobs */
#define MMS__POOL_RATE_MIN_US  20       /* caller's parts shorter than this tell no rate (the wall clock counts microseconds) */

typedef void (*mms__pool_fn)(void *arg, int part, int n_parts, int worker);

struct mms__threadpool {
    int             n_threads;        /* workers including the caller */
    mms__thread    *threads;          /* n_threads - 1 helpers */
    mms__mutex      mutex;
    mms__cond       work_cond;        /* helpers: a new job, or stop */
    mms__cond       done_cond;        /* the caller: the last part is done */
    mms__atomic_int stop;
    /* the job: written by the caller before it publishes the claim word; a helper reads it only
       after it claimed a part, and the next job is written only after every part is done */
    mms__pool_fn    fn;
    void           *arg;
    int             n_parts;
    int64_t         epoch;            /* the caller's count of jobs */
    mms__atomic_i64 claim;            /* epoch << MMS__POOL_PARTS_BITS | parts left */
    mms__atomic_int done;             /* parts finished in this job */
    mms__atomic_int sleepers;         /* helpers asleep on work_cond */
    mms__atomic_int caller_asleep;
    mms__atomic_int signal_us;        /* when sleepers were last signalled (mms_time_us, low 32 bits) */
    mms__atomic_int spin_us;          /* the spin budget */
    /* what the caller learnt (the caller's own) */
    float           share;            /* running average of the parts' share the helpers took */
    float           cost_us;          /* running average of what a split cost the caller */
    float           rate;             /* running average of the caller's CPU time over wall time in its parts (<= 1) */
    int64_t         learnt_at;        /* when the averages were last updated or faded */
    mms__atomic_int test_hold_helpers;   /* tests: helpers take no part (as if the OS never ran them) */
};

static int64_t mms__claim_epoch(int64_t w) { return w >> MMS__POOL_PARTS_BITS; }
static int     mms__claim_left(int64_t w)  { return (int)(w & (((int64_t)1 << MMS__POOL_PARTS_BITS) - 1)); }

static void mms__threadpool_signalled(struct mms__threadpool *pool) {
    mms__atomic_store(&pool->signal_us, (int32_t)(uint32_t)mms_time_us());
}

/* A sleeper is running again at now_us: the budget becomes twice its wake-up time where that is
   more, or decays by an eighth toward it (a wake-up that seems to come before its signal counts as
   instant). The clock is an argument so a test can say when the wake-up came. */
static void mms__threadpool_woke_at(struct mms__threadpool *pool, int64_t now_us) {
    const int32_t since = (int32_t)((uint32_t)now_us - (uint32_t)mms__atomic_load(&pool->signal_us));
    const int32_t wake = MMS__MIN(MMS__MAX(since, 0), MMS__POOL_SPIN_MAX_US);   /* 2 * wake cannot overflow */
    const int32_t old = mms__atomic_load(&pool->spin_us), budget = MMS__MAX(2 * wake, old - old / 8);
    mms__atomic_store(&pool->spin_us, MMS__MIN(MMS__MAX(budget, MMS__POOL_SPIN_MIN_US), MMS__POOL_SPIN_MAX_US));
}

static void mms__threadpool_woke(struct mms__threadpool *pool) { mms__threadpool_woke_at(pool, mms_time_us()); }

/* Looks at ready(pool, arg) until it is true (returns true) or the spin budget is spent (false):
   pure spinning first, then a yield of the core between looks. */
static bool mms__threadpool_spin(struct mms__threadpool *pool, bool (*ready)(struct mms__threadpool *, const void *), const void *arg) {
    const int64_t t0 = mms_time_us(), budget = mms__atomic_load(&pool->spin_us);
    int i;
    for (i = 0; i < MMS__POOL_PURE_SPINS; i++) {
        if (ready(pool, arg)) return true;
        mms__cpu_relax();
    }
    for (;;) {
        int64_t t;
        if (ready(pool, arg)) return true;
        mms__thread_yield();
        t = mms_time_us() - t0;
        if (t < 0 || t >= budget) return false;   /* < 0: a clock that went back */
    }
}

/* A job newer than the one a helper saw has parts left, or the pool stops. */
static bool mms__threadpool_has_work(struct mms__threadpool *pool, const void *seen) {
    const int64_t w = mms__atomic_load64(&pool->claim);
    if (mms__atomic_load(&pool->stop)) return true;
    return !mms__atomic_load(&pool->test_hold_helpers) && mms__claim_epoch(w) != *(const int64_t *)seen && mms__claim_left(w) > 0;
}

static bool mms__threadpool_all_done(struct mms__threadpool *pool, const void *unused) {
    MMS__UNUSED(unused);
    return mms__atomic_load(&pool->done) == pool->n_parts;
}

/* Takes one part of the job in w's epoch: its index, or -1 when none is left (or a newer job began). */
static int mms__threadpool_claim(struct mms__threadpool *pool, int64_t epoch) {
    for (;;) {
        const int64_t w = mms__atomic_load64(&pool->claim);
        if (mms__claim_epoch(w) != epoch || mms__claim_left(w) == 0) return -1;
        if (mms__atomic_cas64(&pool->claim, w, w - 1)) return pool->n_parts - mms__claim_left(w);
    }
}

/* A part is done; the last one wakes the caller if it sleeps. A sleeper sets its flag before it
   checks the count under the mutex, and the count is a read-modify-write before the flag's load,
   so the caller is either seen asleep or sees the count. */
static void mms__threadpool_part_done(struct mms__threadpool *pool) {
    const int n_parts = pool->n_parts;   /* read first: once the count reaches it, the caller may write the next job */
    if (mms__atomic_fetch_add(&pool->done, 1) + 1 == n_parts && mms__atomic_load(&pool->caller_asleep)) {
        mms__mutex_lock(&pool->mutex);
        mms__threadpool_signalled(pool);
        mms__cond_broadcast(&pool->done_cond);
        mms__mutex_unlock(&pool->mutex);
    }
}

struct mms__helper_arg { struct mms__threadpool *pool; int worker; };

static void *mms__threadpool_helper(void *p) {
    struct mms__helper_arg *ha = (struct mms__helper_arg *)p;
    struct mms__threadpool *pool = ha->pool;
    int64_t seen = 0;
    for (;;) {
        int part;
        if (!mms__threadpool_spin(pool, mms__threadpool_has_work, &seen)) {
            mms__atomic_fetch_add(&pool->sleepers, 1);
            mms__mutex_lock(&pool->mutex);
            if (!mms__threadpool_has_work(pool, &seen)) {
                do mms__cond_wait(&pool->work_cond, &pool->mutex); while (!mms__threadpool_has_work(pool, &seen));
                mms__threadpool_woke(pool);
            }
            mms__mutex_unlock(&pool->mutex);
            mms__atomic_fetch_add(&pool->sleepers, -1);
        }
        if (mms__atomic_load(&pool->stop)) break;
        seen = mms__claim_epoch(mms__atomic_load64(&pool->claim));
        /* a test's hold is read after the job it covers: has_work may have looked before it was set */
        if (mms__atomic_load(&pool->test_hold_helpers)) continue;
        while ((part = mms__threadpool_claim(pool, seen)) >= 0) {
            pool->fn(pool->arg, part, pool->n_parts, ha->worker);
            mms__threadpool_part_done(pool);
        }
    }
    MMS_FREE(ha);
    return NULL;
}

static void mms__threadpool_free(struct mms__threadpool *pool) {
    int i;
    if (!pool) return;
    mms__mutex_lock(&pool->mutex);
    mms__atomic_store(&pool->stop, 1);
    mms__cond_broadcast(&pool->work_cond);
    mms__mutex_unlock(&pool->mutex);
    for (i = 0; i < pool->n_threads - 1; i++) mms__thread_join(pool->threads[i]);
    mms__mutex_destroy(&pool->mutex);
    mms__cond_destroy(&pool->work_cond);
    mms__cond_destroy(&pool->done_cond);
    MMS_FREE(pool->threads);
    MMS_FREE(pool);
}

static struct mms__threadpool *mms__threadpool_new(int n_threads) {
    struct mms__threadpool *pool = (struct mms__threadpool *)MMS_MALLOC(sizeof *pool);
    int i;
    if (!pool) return NULL;
    memset(pool, 0, sizeof *pool);
    pool->n_threads = 1;
    pool->share = 0.5f;               /* hopeful until measured: half the work for a wake-up's cost */
    pool->rate = 1.0f;
    pool->cost_us = (float)MMS__POOL_SPIN_MIN_US / 10.0f;
    pool->learnt_at = mms_time_us();
    mms__atomic_store(&pool->spin_us, MMS__POOL_SPIN_MIN_US);
    mms__mutex_init(&pool->mutex);
    mms__cond_init(&pool->work_cond);
    mms__cond_init(&pool->done_cond);
    pool->threads = (mms__thread *)MMS_MALLOC(sizeof(mms__thread) * (size_t)(n_threads > 1 ? n_threads - 1 : 1));
    if (!pool->threads) { mms__threadpool_free(pool); return NULL; }
    for (i = 1; i < n_threads; i++) {
        struct mms__helper_arg *ha = (struct mms__helper_arg *)MMS_MALLOC(sizeof *ha);
        if (!ha) break;
        ha->pool = pool;
        ha->worker = i;
        if (!mms__thread_create(&pool->threads[i - 1], mms__threadpool_helper, ha)) { MMS_FREE(ha); break; }
        pool->n_threads++;   /* only helpers that started count */
    }
    if (pool->n_threads != n_threads) { mms__threadpool_free(pool); return NULL; }
    return pool;
}

/* What a split saves, as a fraction of the node's time: the helpers' share, less the caller's
   slowdown in its own parts (the top comment). */
static float mms__threadpool_gain(const struct mms__threadpool *pool) {
    return MMS__MAX(1.0f - (1.0f - pool->share) / MMS__MAX(pool->rate, 0.01f), 0.0f);
}

/* A job ended at now_us: the helpers took share of its parts, the split cost the caller cost_us
   beyond its own parts, which ran at rate (its CPU time over wall time; negative: not measured). */
static void mms__threadpool_learn(struct mms__threadpool *pool, float share, float cost_us, float rate, int64_t now_us) {
    pool->share += MMS__POOL_LEARN * (share - pool->share);
    pool->cost_us += MMS__POOL_LEARN * (cost_us - pool->cost_us);
    if (rate >= 0.0f) pool->rate += 2.0f * MMS__POOL_LEARN * (MMS__MIN(rate, 1.0f) - pool->rate);
    pool->learnt_at = now_us;
}

/* Whether a node of about cost_us (one thread's time) is worth splitting at time now_us, from what
   splits cost lately (the top comment). The clock is an argument so a test can say when it asks. */
static bool mms__threadpool_worth_at(struct mms__threadpool *pool, double cost_us, int64_t now_us) {
    if (pool->n_threads == 1) return false;
    if (now_us - pool->learnt_at > MMS__POOL_FORGET_US) {
        pool->cost_us *= 0.5f;
        pool->share = MMS__MAX(pool->share, 0.5f * (float)(pool->n_threads - 1) / (float)pool->n_threads);
        pool->rate += 0.5f * (1.0f - pool->rate);
        pool->learnt_at = now_us;
    }
    return cost_us * mms__threadpool_gain(pool) > MMS__MAX(pool->cost_us, MMS__POOL_SPLIT_MIN_US);
}

static bool mms__threadpool_worth(struct mms__threadpool *pool, double cost_us) {
    return mms__threadpool_worth_at(pool, cost_us, mms_time_us());
}

/* Runs fn(arg, part, n_parts, worker) for every part, the caller taking parts as worker 0, and
   returns when all are done. Learns what the split cost (mms__threadpool_worth). */
static void mms__threadpool_run(struct mms__threadpool *pool, mms__pool_fn fn, void *arg, int n_parts) {
    int64_t t0, in_parts = 0, loop_t0, loop_cpu0 = -1;
    int part, mine = 0, sleepers;
    float rate;
    if (pool->n_threads == 1 || n_parts <= 1) {
        for (part = 0; part < n_parts; part++) fn(arg, part, n_parts, 0);
        return;
    }
    t0 = mms_time_us();
    pool->fn = fn;
    pool->arg = arg;
    pool->n_parts = n_parts;
    mms__atomic_store(&pool->done, 0);
    pool->epoch++;
    mms__atomic_exchange64(&pool->claim, pool->epoch << MMS__POOL_PARTS_BITS | (int64_t)n_parts);
    /* a helper counts itself asleep before it looks at the claim word under the mutex, and the
       exchange above comes before this load: a sleeper is either seen here or sees the job */
    if ((sleepers = mms__atomic_load(&pool->sleepers)) > 0) {
        int i;
        mms__mutex_lock(&pool->mutex);
        mms__threadpool_signalled(pool);
        for (i = 0; i < MMS__MIN(sleepers, n_parts - 1); i++) mms__cond_signal(&pool->work_cond);
        mms__mutex_unlock(&pool->mutex);
    }
    if (pool->rate < 0.9f || pool->epoch % MMS__POOL_RATE_EVERY == 0) loop_cpu0 = mms__thread_cpu_ns();
    loop_t0 = mms_time_us();
    while ((part = mms__threadpool_claim(pool, pool->epoch)) >= 0) {
        const int64_t t = mms_time_us();
        fn(arg, part, n_parts, 0);
        in_parts += mms_time_us() - t;
        mine++;
        mms__threadpool_part_done(pool);
    }
    {   /* the caller's rate in its parts, where measured and long enough to tell */
        const int64_t cpu1 = loop_cpu0 >= 0 ? mms__thread_cpu_ns() : -1, wall = mms_time_us() - loop_t0;
        rate = mine > 0 && cpu1 >= loop_cpu0 && wall >= MMS__POOL_RATE_MIN_US ? (float)((double)(cpu1 - loop_cpu0) / 1000.0 / (double)wall) : -1.0f;
    }
    if (!mms__threadpool_spin(pool, mms__threadpool_all_done, NULL)) {
        mms__atomic_store(&pool->caller_asleep, 1);
        mms__mutex_lock(&pool->mutex);
        if (!mms__threadpool_all_done(pool, NULL)) {
            do mms__cond_wait(&pool->done_cond, &pool->mutex); while (!mms__threadpool_all_done(pool, NULL));
            mms__threadpool_woke(pool);
        }
        mms__mutex_unlock(&pool->mutex);
        mms__atomic_store(&pool->caller_asleep, 0);
    }
    {
        const int64_t now = mms_time_us();
        mms__threadpool_learn(pool, (float)(n_parts - mine) / (float)n_parts, (float)MMS__MAX(now - t0 - in_parts, 0), rate, now);
    }
}
