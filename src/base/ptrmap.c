/* >>ptrmap ========================================================================================
   A small open-addressing hash map from non-zero 64-bit keys (pointers, uids) to pointers, with
   linear probing and backward-shift deletion. It grows as needed; a zeroed struct is empty. */

struct mms__ptrmap {
    uint64_t *keys;   /* 0 = empty slot */
    void    **vals;
    size_t    cap;    /* power of two, or 0 */
    size_t    count;
};

/* FNV-1a over bytes, continued from h (MMS__FNV1A64_START to begin): checksums of dumps, pixels, texts. */
#define MMS__FNV1A64_START 0xcbf29ce484222325ULL
static uint64_t mms__fnv1a64(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ULL; }
    return h;
}

static size_t mms__hash64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x;
}

static void mms__ptrmap_free(struct mms__ptrmap *m) {
    MMS_FREE(m->keys);
    MMS_FREE(m->vals);
    memset(m, 0, sizeof *m);
}

static size_t mms__ptrmap_slot(const struct mms__ptrmap *m, uint64_t key) {
    size_t mask = m->cap - 1, i = mms__hash64(key) & mask;
    while (m->keys[i] != 0 && m->keys[i] != key) i = (i + 1) & mask;
    return i;
}

static void *mms__ptrmap_get(const struct mms__ptrmap *m, uint64_t key, bool *found) {
    size_t i;
    if (m->cap == 0) { if (found) *found = false; return NULL; }
    i = mms__ptrmap_slot(m, key);
    if (found) *found = m->keys[i] == key;
    return m->keys[i] == key ? m->vals[i] : NULL;
}

static bool mms__ptrmap_grow(struct mms__ptrmap *m) {
    struct mms__ptrmap bigger;
    size_t i;
    bigger.cap = m->cap ? m->cap * 2 : 64;
    bigger.count = 0;
    bigger.keys = (uint64_t *)MMS_MALLOC(bigger.cap * sizeof *bigger.keys);
    bigger.vals = (void **)MMS_MALLOC(bigger.cap * sizeof *bigger.vals);
    if (!bigger.keys || !bigger.vals) {
        MMS_FREE(bigger.keys);
        MMS_FREE(bigger.vals);
        return false;
    }
    memset(bigger.keys, 0, bigger.cap * sizeof *bigger.keys);
    for (i = 0; i < m->cap; i++) {
        if (m->keys[i]) {
            size_t j = mms__ptrmap_slot(&bigger, m->keys[i]);
            bigger.keys[j] = m->keys[i];
            bigger.vals[j] = m->vals[i];
            bigger.count++;
        }
    }
    mms__ptrmap_free(m);
    *m = bigger;
    return true;
}

/* Insert or replace. False only when memory runs out. */
static bool mms__ptrmap_put(struct mms__ptrmap *m, uint64_t key, void *val) {
    size_t i;
    MMS_ASSERT(key != 0);
    if ((m->count + 1) * 2 > m->cap && !mms__ptrmap_grow(m)) return false;
    i = mms__ptrmap_slot(m, key);
    if (m->keys[i] != key) { m->keys[i] = key; m->count++; }
    m->vals[i] = val;
    return true;
}

static void mms__ptrmap_remove(struct mms__ptrmap *m, uint64_t key) {
    size_t mask, i, j;
    if (m->cap == 0) return;
    mask = m->cap - 1;
    i = mms__ptrmap_slot(m, key);
    if (m->keys[i] != key) return;
    m->keys[i] = 0;
    m->count--;
    /* shift later members of the probe run back so lookups never stop early */
    for (j = (i + 1) & mask; m->keys[j] != 0; j = (j + 1) & mask) {
        size_t home = mms__hash64(m->keys[j]) & mask;
        bool between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!between) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->keys[j] = 0;
            i = j;
        }
    }
}
