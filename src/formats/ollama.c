/* >>ollama =========================================================================================
   Ollama's model store: a model name to its manifest (Ollama's naming rules), the manifest's
   layers to their blobs. Nothing is written; blobs are checked for presence and size only. */

#define MMS__OLLAMA_MODEL_TYPE     "application/vnd.ollama.image.model"
#define MMS__OLLAMA_PROJECTOR_TYPE "application/vnd.ollama.image.projector"
#define MMS__OLLAMA_ADAPTER_TYPE   "application/vnd.ollama.image.adapter"

/* One part of a name as Ollama accepts it: 1-80 characters (a host up to 350) of letters, digits,
   '_', '-' and '.' (not in a namespace; a host may have ':' for its port), the first a letter,
   digit or '_'. So no part is empty, "." or "..", and none holds a path separator. */
static bool mms__ollama_part_ok(const char *s, size_t n, char kind) {
    size_t i;
    if (n < 1 || n > (kind == 'h' ? 350u : 80u)) return false;
    for (i = 0; i < n; i++) {
        const char c = s[i];
        const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        if (word) continue;
        if (i == 0) return false;
        if (c == '-' || (c == '.' && kind != 'n') || (c == ':' && kind == 'h')) continue;
        return false;
    }
    return true;
}

/* The manifest's path below a store: HOST/NAMESPACE/MODEL/TAG from [HOST/][NAMESPACE/]MODEL[:TAG]
   (defaults registry.ollama.ai, library, latest: Ollama's). */
static enum mms_status mms__ollama_name_path(const char *name, char *out, size_t size) {
    const char *parts[3], *colon = strrchr(name, ':'), *slash = strrchr(name, '/'), *tag = "latest", *p;
    size_t lens[3], tag_len = 6, end = strlen(name);
    int n = 0, i;
    static const char kinds[3] = { 'm', 'n', 'h' };
    if (colon && (!slash || colon > slash)) { tag = colon + 1; tag_len = strlen(tag); end = (size_t)(colon - name); }
    while (n < 3) {   /* from the right: model, namespace, host */
        p = end > 0 ? name + end - 1 : name;
        while (p > name && *p != '/') p--;
        if (*p == '/') p++;
        parts[n] = p;
        lens[n] = end - (size_t)(p - name);
        n++;
        if (p == name) break;
        end = (size_t)(p - name) - 1;
    }
    if (parts[n - 1] != name || !mms__ollama_part_ok(tag, tag_len, 't'))
        return mms_set_error(MMS_ERR_INVALID_ARG, "ollama: \"%s\" is not a model name: [HOST/][NAMESPACE/]MODEL[:TAG], each part letters, digits, "
                             "'_', '-' or '.'", name);
    for (i = 0; i < n; i++)
        if (!mms__ollama_part_ok(parts[i], lens[i], kinds[i]))
            return mms_set_error(MMS_ERR_INVALID_ARG, "ollama: \"%s\" is not a model name: its %s \"%.*s\" is not one Ollama accepts", name,
                                 i == 0 ? "model" : i == 1 ? "namespace" : "host", (int)lens[i], parts[i]);
    if (snprintf(out, size, "%.*s/%.*s/%.*s/%.*s", n > 2 ? (int)lens[2] : 18, n > 2 ? parts[2] : "registry.ollama.ai",
                 n > 1 ? (int)lens[1] : 7, n > 1 ? parts[1] : "library", (int)lens[0], parts[0], (int)tag_len, tag) >= (int)size)
        return mms_set_error(MMS_ERR_INVALID_ARG, "ollama: \"%s\" is too long", name);
    return MMS_OK;
}

/* The stores to look in, in order: $OLLAMA_MODELS alone when set; else the user's ~/.ollama/models
   and (Linux service installs, whose ollama user's home it is) /usr/share/ollama/.ollama/models. */
static int mms__ollama_stores(char stores[2][1024]) {
    const char *env = getenv("OLLAMA_MODELS"), *home = getenv("HOME");
    int n = 0;
#ifdef _WIN32
    if (!home || !*home) home = getenv("USERPROFILE");
#endif
    if (env && *env) {
        snprintf(stores[n++], 1024, "%s", env);
        return n;
    }
    if (home && *home && strlen(home) < 1000) snprintf(stores[n++], 1024, "%s/.ollama/models", home);
#ifndef _WIN32
    snprintf(stores[n++], 1024, "/usr/share/ollama/.ollama/models");
#endif
    return n;
}

/* The blob of a layer: STORE/blobs/sha256-HEX, present and of the size the manifest gives. */
static enum mms_status mms__ollama_blob(const struct mms_json *j, int64_t layer, const char *store, const char *what, char *out, size_t size) {
    size_t n = 0, i, have;
    const char *digest = mms_json_str(j, mms_json_get(j, layer, "digest"), &n);
    double want = -1;
    struct mms__mapping map;
    bool hex = digest && n == 71 && (!strncmp(digest, "sha256:", 7) || !strncmp(digest, "sha256-", 7));
    for (i = 7; hex && i < n; i++) hex = isxdigit((unsigned char)digest[i]) != 0;
    if (!hex)
        return mms_set_error(MMS_ERR_FORMAT, "ollama: '%s': the %s layer's digest \"%.80s\" is not sha256:<64 hex digits>", mms_json_source(j), what,
                             digest ? digest : "(none)");
    if (snprintf(out, size, "%s/blobs/sha256-%s", store, digest + 7) >= (int)size)
        return mms_set_error(MMS_ERR_INVALID_ARG, "ollama: the store's path '%s' is too long", store);
    if (mms__map_file(out, &map) != MMS_OK)
        return mms__error_context(MMS_ERR_IO, "ollama: the %s blob that '%s' names cannot be read: %s", what, mms_json_source(j), mms_last_error());
    have = map.size;
    mms__unmap_file(&map);
    if (mms_json_num(j, mms_json_get(j, layer, "size"), &want) && want != (double)have)
        return mms_set_error(MMS_ERR_FORMAT, "ollama: the %s blob '%s' is %zu bytes, '%s' says %.0f (an unfinished copy?)", what, out, have,
                             mms_json_source(j), want);
    return MMS_OK;
}

MMS_API enum mms_status mms_ollama_resolve(const char *name, struct mms_ollama_model *out) {
    char stores[2][1024], rel[600];
    struct mms_json *j = NULL;
    const size_t prefix = strlen(MMS_OLLAMA_PREFIX);
    int64_t layers, i, model = -1, projector = -1, n_projectors = 0;
    int n_stores, s;
    enum mms_status st;
    if (!name || !out) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_ollama_resolve: name and out are required");
    memset(out, 0, sizeof *out);
    if (!strncmp(name, MMS_OLLAMA_PREFIX, prefix)) name += prefix;
    if ((st = mms__ollama_name_path(name, rel, sizeof rel)) != MMS_OK) return st;
    n_stores = mms__ollama_stores(stores);
    for (s = 0; s < n_stores; s++) {
        snprintf(out->manifest, sizeof out->manifest, "%s/manifests/%s", stores[s], rel);
        if (mms__file_exists(out->manifest)) break;
    }
    if (s == n_stores) {
        if (n_stores == 1)
            return mms_set_error(MMS_ERR_IO, "ollama: no model \"%s\": '%s' does not exist (OLLAMA_MODELS names the store; `ollama list` shows what it has)",
                                 name, out->manifest);
        return mms_set_error(MMS_ERR_IO, "ollama: no model \"%s\": neither '%s/manifests/%s' nor '%s' exists (set OLLAMA_MODELS to the store; "
                             "`ollama list` shows what it has)", name, stores[0], rel, out->manifest);
    }
    if (!(j = mms_json_parse_file(out->manifest))) return mms__error_context(mms_last_status(), "ollama: %s", mms_last_error());
    layers = mms_json_get(j, 0, "layers");
    if (mms_json_type(j, layers) != MMS_JSON_ARRAY) {
        st = mms_set_error(MMS_ERR_FORMAT, "ollama: '%s' is not a manifest: it has no \"layers\" array", out->manifest);
        goto done;
    }
    for (i = 0; i < mms_json_len(j, layers); i++) {   /* the last model layer counts, as in Ollama */
        const char *type = mms_json_str(j, mms_json_get(j, mms_json_at(j, layers, i), "mediaType"), NULL);
        if (!type) continue;
        if (!strcmp(type, MMS__OLLAMA_MODEL_TYPE)) model = mms_json_at(j, layers, i);
        if (!strcmp(type, MMS__OLLAMA_PROJECTOR_TYPE)) { projector = mms_json_at(j, layers, i); n_projectors++; }
        if (!strcmp(type, MMS__OLLAMA_ADAPTER_TYPE)) {
            st = mms_set_error(MMS_ERR_UNSUPPORTED, "ollama: '%s' has an adapter layer (a LoRA applied over the model), which mmsched does not apply",
                               out->manifest);
            goto done;
        }
    }
    if (model < 0) {
        st = mms_set_error(MMS_ERR_FORMAT, "ollama: '%s' has no model layer (mediaType %s)", out->manifest, MMS__OLLAMA_MODEL_TYPE);
        goto done;
    }
    if (n_projectors > 1) {
        st = mms_set_error(MMS_ERR_UNSUPPORTED, "ollama: '%s' has %lld projector layers; mmsched takes one", out->manifest, (long long)n_projectors);
        goto done;
    }
    if ((st = mms__ollama_blob(j, model, stores[s], "model", out->model, sizeof out->model)) != MMS_OK) goto done;
    if (projector >= 0) st = mms__ollama_blob(j, projector, stores[s], "projector", out->projector, sizeof out->projector);
done:
    mms_json_free(j);
    if (st != MMS_OK) out->model[0] = out->projector[0] = '\0';
    return st;
}
