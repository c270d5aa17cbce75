/* Running a program under test (the examples) from a test: status, stdout and stderr captured
   through files in a scratch folder. Needs POSIX (system, WIFEXITED). */
#ifndef MMS_TEST_RUN_PROGRAM_H
#define MMS_TEST_RUN_PROGRAM_H

#include <sys/wait.h>

struct run {
    int   status;     /* exit status, or -1 when it did not exit normally */
    char *out, *err;
};

TEST_FN void test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(data, 1, n, f); fclose(f); }
}

/* Runs `program args` (shell syntax) with stdin from `input` (NULL: empty), files in dir. */
TEST_FN struct run test_run_program(const char *program, const char *args, const char *input, const char *dir) {
    struct run r;
    char cmd[4096], in_path[256], out_path[256], err_path[256];
    int st;
    snprintf(in_path, sizeof in_path, "%s/in", dir);
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    test_write_file(in_path, input ? input : "", input ? strlen(input) : 0);
    snprintf(cmd, sizeof cmd, "%s %s <%s >%s 2>%s", program, args, in_path, out_path, err_path);
    st = system(cmd);
    r.status = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = test_slurp(out_path, NULL);
    r.err = test_slurp(err_path, NULL);
    if (!r.out) r.out = (char *)calloc(1, 1);
    if (!r.err) r.err = (char *)calloc(1, 1);
    return r;
}

TEST_FN void run_free(struct run *r) { free(r->out); free(r->err); }

#endif
