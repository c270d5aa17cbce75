/* >>compute =======================================================================================
   What a CPU kernel is given: its part of the node (ith of nth; the parts of a node run in any
   order, on any threads, side by side), its thread's scratch memory and the shared state of the
   graph being computed (a work counter for dynamic scheduling, the first error). */

struct mms__compute_state {
    mms__atomic_int failed;
    enum mms_status status;
    char            error[MMS__ERROR_MAX];
};

struct mms__compute_params {
    int   ith, nth;                /* the part, of this many */
    float *wdata;                  /* the running thread's scratch */
    size_t wsize;                  /* bytes of it */
    mms__atomic_int *counter;      /* starts at 0 for this node, shared by its parts */
    struct mms__compute_state *state;
};

/* The rows of a tensor that part p takes (mms__split of them), one at a time:
       struct mms__part_rows rows = mms__part_rows_of(p, t);
       while (mms__next_row(&rows, &i1, &i2, &i3)) ...   (the row's number in rows.r) */
struct mms__part_rows {
    const int64_t *ne;
    int64_t        r, end;
};

static struct mms__part_rows mms__part_rows_of(const struct mms__compute_params *p, const struct mms_tensor *t) {
    struct mms__part_rows rows;
    int64_t lo;
    mms__split(mms_nrows(t), p->ith, p->nth, &lo, &rows.end);
    rows.ne = t->ne;
    rows.r = lo - 1;
    return rows;
}

/* The next row's indices; false past the part's last. */
static bool mms__next_row(struct mms__part_rows *rows, int64_t *i1, int64_t *i2, int64_t *i3) {
    if (rows->r + 1 >= rows->end) return false;
    mms__unravel_row(rows->ne, ++rows->r, i1, i2, i3);
    return true;
}

/* A kernel that meets bad data (an index out of range) reports it; the graph stops after the node. */
static void mms__compute_fail(const struct mms__compute_params *p, enum mms_status status, const char *fmt, ...) MMS_PRINTF(3, 4);
static void mms__compute_fail(const struct mms__compute_params *p, enum mms_status status, const char *fmt, ...) {
    va_list ap;
    if (mms__atomic_fetch_add(&p->state->failed, 1) != 0) return;   /* keep the first */
    va_start(ap, fmt);
    vsnprintf(p->state->error, sizeof p->state->error, fmt, ap);
    va_end(ap);
    p->state->status = status;
}

/* One element of a float tensor as f32, at any strides. */
static float mms__get_f32(const struct mms_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char *ptr = mms__row_ptr(t, i1, i2, i3) + i0 * (int64_t)t->nb[0];
    float f;
    switch (t->type) {
        case MMS_TYPE_F32:  memcpy(&f, ptr, sizeof f); return f;
        case MMS_TYPE_F16:  { mms_fp16_t h; memcpy(&h, ptr, sizeof h); return mms_fp16_to_fp32(h); }
        case MMS_TYPE_BF16: { mms_bf16_t h; memcpy(&h, ptr, sizeof h); return mms_bf16_to_fp32(h); }
        default: mms__abort(__FILE__, __LINE__, "mms__get_f32 on a %s tensor", mms_type_name(t->type));
    }
}
