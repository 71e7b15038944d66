/* A main() for the fuzz targets in builds without libFuzzer (the default gcc build): feeds
 * each file named on the command line, and each file of each folder named, to the target's
 * LLVMFuzzerTestOneInput, so that every build replays the regression corpus
 * (tests/fuzz/regress/<target>/, docs/FUZZING.md).
 *
 *     fuzz_onnx_replay tests/fuzz/regress/fuzz_onnx     # "fuzz_onnx: 3 inputs replayed"
 *
 * A crash is the test's failure (the ctest test fails on the signal); a file that cannot be
 * read fails it too. An empty folder passes.
 */
#include "fuzz.h"

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                fprintf(stderr, "%s: out of memory\n", path);
                return 1;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        fprintf(stderr, "%s: read failed\n", path);
        return 1;
    }
    /* a copy of exactly len bytes, so that a read past the end is caught where it can be */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    if (len) memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of the folder, in name order; *n counts them. */
static int replay_dir(const char *dir, int *n) {
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return 1;
    }
    char **names = NULL;
    int n_names = 0, cap = 0, rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n_names == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) {
                rc = 1;
                break;
            }
            names = nn;
        }
        if (!(names[n_names] = strdup(e->d_name))) {
            rc = 1;
            break;
        }
        n_names++;
    }
    closedir(d);
    if (n_names) qsort(names, (size_t)n_names, sizeof *names, cmp_names);
    for (int i = 0; i < n_names; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (!rc && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            rc = replay_file(path);
            (*n)++;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int n = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            rc = replay_dir(argv[i], &n);
        } else {
            rc = replay_file(argv[i]);
            n++;
        }
    }
    printf("%s: %d inputs replayed%s\n", argv[0], n, rc ? ", failed" : "");
    return rc;
}
