/* >>mllama-image-store ============================================================================
   Encoded pictures kept by content for reuse: a picture's cross-attention keys and values (one
   persistent tensor per cross layer, on its layer's backend) and a copy of its model input (the
   pixels of its used tiles and its tile layout). A lookup hashes the model input and, on a hash
   match, compares the input itself: equal hashes alone never make two pictures one. The store
   keeps what fits in its budget of bytes, evicting the least recently used pictures that no
   sequence holds; a picture that does not fit is encoded for its sequence and not kept. */

struct mms__mllama_picture {             /* ctx NULL: a free entry */
    uint64_t            hash;
    float              *pixels;          /* the used tiles, [n_tiles][3][S][S] */
    size_t              n_pixels;        /* floats in pixels */
    int                 n_tiles, aspect_ratio_id;
    struct mms_context *ctx;             /* its graph's tensors; the persistent K/V stay valid */
    struct mms_tensor **k, **v;          /* per text layer, set for cross layers; one block, v after k */
    size_t              bytes[2];        /* on backend 0 (the host: pixels, K/V of host layers) and 1 */
    int64_t             last_use;
    int                 n_users;         /* sequences holding it: not evicted while above 0 */
};

struct mms__mllama_store {
    struct mms__mllama_picture *pics;
    int                         cap;     /* entries: as many as the budget can hold */
    size_t                      budget, bytes, peak, bytes_on[2], peak_on[2];
    int64_t                     clock, n_hits, n_encodes, n_evicted, n_not_kept;
};

/* Tests set this to give every picture the same hash, so only the comparison of the model input
   keeps pictures apart. */
static bool mms__mllama_store_same_hash = false;

static uint64_t mms__mllama_picture_hash(const struct mms_mllama_image *img) {
    const size_t tile = (size_t)3 * (size_t)img->image_size * (size_t)img->image_size;
    uint64_t h;
    if (mms__mllama_store_same_hash) return 1;
    h = mms__fnv1a64(img->pixels, sizeof(float) * tile * (size_t)img->n_tiles, MMS__FNV1A64_START);
    h = mms__fnv1a64(&img->aspect_ratio_id, sizeof img->aspect_ratio_id, h);
    return h ? h : 1;
}

/* The same model input: tile layout and the used tiles' pixels (the other tiles are zero in both). */
static bool mms__mllama_picture_is(const struct mms__mllama_picture *p, const struct mms_mllama_image *img) {
    const size_t tile = (size_t)3 * (size_t)img->image_size * (size_t)img->image_size;
    return p->n_tiles == img->n_tiles && p->aspect_ratio_id == img->aspect_ratio_id && p->n_pixels == tile * (size_t)img->n_tiles &&
           memcmp(p->pixels, img->pixels, sizeof(float) * p->n_pixels) == 0;
}

/* Two preprocessed images are the same model input (the serving engine's test for a slot's pictures). */
static bool mms__mllama_image_same(const struct mms_mllama_image *a, const struct mms_mllama_image *b) {
    const size_t n = (size_t)3 * (size_t)a->image_size * (size_t)a->image_size * (size_t)a->n_tiles;
    return a->image_size == b->image_size && a->n_tiles == b->n_tiles && a->aspect_ratio_id == b->aspect_ratio_id &&
           memcmp(a->pixels, b->pixels, sizeof(float) * n) == 0;
}

static void mms__mllama_store_drop(struct mms__mllama_store *st, mms_backend_sched_t sched, int n_layer, struct mms__mllama_picture *p) {
    int il, b;
    for (il = 0; il < n_layer && p->k; il++) {
        if (p->k[il]) mms_backend_sched_release(sched, p->k[il]);
        if (p->v[il]) mms_backend_sched_release(sched, p->v[il]);
    }
    for (b = 0; b < 2; b++) st->bytes_on[b] -= p->bytes[b];
    st->bytes -= p->bytes[0] + p->bytes[1];
    MMS_FREE(p->k);                      /* v is its second half */
    MMS_FREE(p->pixels);
    mms_free(p->ctx);
    memset(p, 0, sizeof *p);
}

static void mms__mllama_store_free(struct mms__mllama_store *st, mms_backend_sched_t sched, int n_layer) {
    int i;
    for (i = 0; st->pics && i < st->cap; i++)
        if (st->pics[i].ctx) mms__mllama_store_drop(st, sched, n_layer, &st->pics[i]);
    MMS_FREE(st->pics);
    st->pics = NULL;
}

/* The entry holding img's model input, or -1. */
static int mms__mllama_store_find(struct mms__mllama_store *st, const struct mms_mllama_image *img, uint64_t hash) {
    int i;
    for (i = 0; i < st->cap; i++)
        if (st->pics[i].ctx && st->pics[i].hash == hash && mms__mllama_picture_is(&st->pics[i], img)) {
            st->pics[i].last_use = ++st->clock;
            st->n_hits++;
            return i;
        }
    return -1;
}

/* A free entry with room for `bytes` more, evicting the least recently used pictures no sequence
   holds; -1 when they would not make room (then nothing is evicted). */
static int mms__mllama_store_make_room(struct mms__mllama_store *st, mms_backend_sched_t sched, int n_layer, size_t bytes) {
    size_t evictable = 0;
    int i, free_at = -1;
    for (i = 0; i < st->cap; i++) {
        if (!st->pics[i].ctx) { if (free_at < 0) free_at = i; }
        else if (st->pics[i].n_users == 0) evictable += st->pics[i].bytes[0] + st->pics[i].bytes[1];
    }
    if (bytes > st->budget || st->bytes - evictable + bytes > st->budget || (free_at < 0 && evictable == 0)) return -1;
    while (st->bytes + bytes > st->budget || free_at < 0) {
        int lru = -1;
        for (i = 0; i < st->cap; i++)
            if (st->pics[i].ctx && st->pics[i].n_users == 0 && (lru < 0 || st->pics[i].last_use < st->pics[lru].last_use)) lru = i;
        if (lru < 0) return -1;   /* not reached: the sums above said there was room */
        mms__mllama_store_drop(st, sched, n_layer, &st->pics[lru]);
        st->n_evicted++;
        if (free_at < 0) free_at = lru;
    }
    return free_at;
}

/* Records img's K/V (made in ctx) as entry i. Takes ctx, k and v; copies the pixels. */
static enum mms_status mms__mllama_store_put(struct mms__mllama_store *st, int i, const struct mms_mllama_image *img, uint64_t hash,
                                             struct mms_context *ctx, struct mms_tensor **k, struct mms_tensor **v, const size_t bytes[2]) {
    struct mms__mllama_picture *p = &st->pics[i];
    const size_t n = (size_t)3 * (size_t)img->image_size * (size_t)img->image_size * (size_t)img->n_tiles;
    int b;
    memset(p, 0, sizeof *p);
    if (!(p->pixels = (float *)MMS_MALLOC(sizeof(float) * n))) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory for the image store");
    memcpy(p->pixels, img->pixels, sizeof(float) * n);
    p->n_pixels = n;
    p->hash = hash;
    p->n_tiles = img->n_tiles;
    p->aspect_ratio_id = img->aspect_ratio_id;
    p->ctx = ctx;
    p->k = k;
    p->v = v;
    p->bytes[0] = bytes[0] + sizeof(float) * n;
    p->bytes[1] = bytes[1];
    p->last_use = ++st->clock;
    for (b = 0; b < 2; b++) {
        st->bytes_on[b] += p->bytes[b];
        if (st->bytes_on[b] > st->peak_on[b]) st->peak_on[b] = st->bytes_on[b];
    }
    st->bytes += p->bytes[0] + p->bytes[1];
    if (st->bytes > st->peak) st->peak = st->bytes;
    return MMS_OK;
}
