/* ref_gguf.h - reading the reference files that tools/gen_*_fixtures.py write (GGUF files of
   keys and tensors computed by transformers): keys and tensor names are printf formats with one
   int (the case number). A missing key or tensor is a failed expectation naming it. Include after
   test.h. */
#ifndef MMS_REF_GGUF_H
#define MMS_REF_GGUF_H

TEST_FN uint32_t ref_u32(const struct mms_gguf *r, const char *fmt, int k) {
    char key[96];
    uint32_t v = 0;
    snprintf(key, sizeof key, fmt, k);
    EXPECT(mms_gguf_get_u32(r, key, &v) == MMS_OK, "reference key %s: %s", key, mms_last_error());
    return v;
}

/* A reference tensor's data as floats (NULL and a failed expectation if absent). */
TEST_FN const void *ref_tensor(const struct mms_gguf *r, const char *fmt, int k, struct mms_gguf_tensor_info *info) {
    char name[96];
    int64_t idx;
    snprintf(name, sizeof name, fmt, k);
    idx = mms_gguf_find_tensor(r, name);
    EXPECT(idx >= 0 && mms_gguf_get_tensor(r, idx, info) == MMS_OK, "reference tensor %s missing", name);
    return idx >= 0 ? info->data : NULL;
}

TEST_FN int64_t ref_i32s(const struct mms_gguf *r, const char *fmt, int k, int32_t *out, int64_t cap) {
    char key[96];
    int64_t n = 0;
    snprintf(key, sizeof key, fmt, k);
    EXPECT(mms_gguf_get_arr_i32(r, key, out, cap, &n) == MMS_OK, "reference key %s: %s", key, mms_last_error());
    return n;
}

#endif
