/* The CPU kernel sets a test runs its numeric cases with: every set the library knows, those this
   machine lacks counted as skipped. MMS_TEST_KERNELS=name,name... keeps only the named sets (a
   second run under another emulated CPU need not repeat the sets the first one covered: those are
   left out on purpose, said so, and not counted). Include after test.h. */
#ifndef MMS_TEST_KERNEL_SETS_H
#define MMS_TEST_KERNEL_SETS_H

/* The first set, then the one after k; false past the last the library names. */
TEST_FN bool test_kernel_set_next(enum mms_cpu_kernels *k) {
    *k = (enum mms_cpu_kernels)((int)*k + 1);
    return strcmp(mms_cpu_kernels_name(*k), "unknown") != 0;
}

/* Selects set k for what follows: false (a skip, or a failure that counts) if it cannot run. */
TEST_FN bool test_use_kernel_set(enum mms_cpu_kernels k) {
    const char *name = mms_cpu_kernels_name(k), *only = getenv("MMS_TEST_KERNELS");
    if (only && only[0]) {
        const char *p = strstr(only, name);
        const size_t n = strlen(name);
        while (p && ((p != only && p[-1] != ',') || (p[n] != '\0' && p[n] != ','))) p = strstr(p + 1, name);
        if (!p) { printf("    %s kernels not run: not in MMS_TEST_KERNELS=%s\n", name, only); return false; }
    }
    if (!mms_cpu_kernels_supported(k)) {
        char what[64];
        snprintf(what, sizeof what, "%s kernels", name);
        test_skip_part(what, "this CPU or build lacks them");
        return false;
    }
    if (mms_cpu_set_kernels(k) != MMS_OK || mms_cpu_get_kernels() != k) {
        printf("FAIL cannot select the %s kernels: %s\n", name, mms_last_error());
        test__failed++;
        return false;
    }
    return true;
}

#endif
