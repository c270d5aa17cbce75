/* A model store laid out as Ollama lays it out (its manifest package: manifest/paths.go and
   manifest.go, types/model/name.go), for tests of "ollama:NAME": blobs/sha256-HEX, and
   manifests/HOST/NAMESPACE/MODEL/TAG written as WriteManifest writes one (Go's json.Encoder on
   the Manifest struct: schemaVersion, mediaType, config, layers in that order, each layer's
   mediaType, digest, size; no spaces; a newline). The digests are made up (the store's number
   and the layer's, as 64 hex digits): nothing that loads a model hashes its blobs (Ollama checks
   them when it pulls). setenv needs _POSIX_C_SOURCE 200112L before the first include. */
#ifndef MMS_TEST_OLLAMA_STORE_H
#define MMS_TEST_OLLAMA_STORE_H

struct test_ollama_layer {
    const char *media_type;   /* "model" for application/vnd.ollama.image.model, and so on */
    const char *src;          /* the blob's bytes: a file to copy, or */
    const char *text;         /* the bytes themselves when src is NULL */
};

TEST_FN void test_setenv(const char *name, const char *value) {   /* value NULL: unset */
#if defined(_WIN32)
    _putenv_s(name, value ? value : "");
#else
    if (value) setenv(name, value, 1);
    else unsetenv(name);
#endif
}

/* The blob path of made-up digest (store, layer), as a manifest names it (sha256:HEX) or as a
   file (STORE/blobs/sha256-HEX). */
TEST_FN void test_ollama_digest(int store_id, int layer, char out[72]) {
    snprintf(out, 72, "sha256:%08x%056x", (unsigned)store_id, (unsigned)layer);
}

/* Writes the blobs and the manifest of model "name/tag" (namespace library on registry.ollama.ai)
   into store; false if a file cannot be written. A layer with src == text == NULL is listed but
   its blob is not written (a missing blob). size_delta is added to the first layer's size. */
TEST_FN bool test_ollama_store(const char *store, int store_id, const char *name, const char *tag, const struct test_ollama_layer *layers,
                               int n_layers, long size_delta) {
    static const char *const levels[] = { "/manifests", "/manifests/registry.ollama.ai", "/manifests/registry.ollama.ai/library" };
    char path[1024], digest[72], *manifest = (char *)malloc(65536);
    size_t used = 0;
    int i;
    bool ok = manifest != NULL;
    FILE *f;
    test_make_dir(store);
    for (i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s%s", store, levels[i]);
        test_make_dir(path);
    }
    snprintf(path, sizeof path, "%s/manifests/registry.ollama.ai/library/%s", store, name);
    test_make_dir(path);
    snprintf(path, sizeof path, "%s/blobs", store);
    test_make_dir(path);
    test_ollama_digest(store_id, 0, digest);
    if (ok) used = (size_t)snprintf(manifest, 65536, "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
                                    "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\",\"digest\":\"%s\",\"size\":2},\"layers\":[",
                                    digest);
    for (i = 0; ok && i < n_layers; i++) {
        long n = 0;
        char *data = layers[i].src ? test_slurp(layers[i].src, &n) : NULL;
        if (!layers[i].src && layers[i].text) n = (long)strlen(layers[i].text);
        test_ollama_digest(store_id, i + 1, digest);
        if (layers[i].src || layers[i].text) {
            snprintf(path, sizeof path, "%s/blobs/sha256-%s", store, digest + 7);
            f = fopen(path, "wb");
            ok = f && (layers[i].src ? data != NULL && fwrite(data, 1, (size_t)n, f) == (size_t)n : fputs(layers[i].text, f) >= 0);
            if (f) ok = fclose(f) == 0 && ok;
        }
        free(data);
        used += (size_t)snprintf(manifest + used, 65536 - used, "%s{\"mediaType\":\"application/vnd.ollama.image.%s\",\"digest\":\"%s\",\"size\":%ld}",
                                 i ? "," : "", layers[i].media_type, digest, n + (i == 0 ? size_delta : 0));
    }
    if (ok) used += (size_t)snprintf(manifest + used, 65536 - used, "]}\n");
    snprintf(path, sizeof path, "%s/manifests/registry.ollama.ai/library/%s/%s", store, name, tag);
    f = ok ? fopen(path, "wb") : NULL;
    ok = f && fwrite(manifest, 1, used, f) == used;
    if (f) ok = fclose(f) == 0 && ok;
    free(manifest);
    return ok;
}

#endif
