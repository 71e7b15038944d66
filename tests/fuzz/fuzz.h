/* What the fuzz targets of tests/fuzz share (docs/FUZZING.md): the libFuzzer entry points,
 * and a private scratch folder for the readers that take a path.
 *
 *     int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
 *         const char *path = fuzz_file("in.npy", data, size);   // NULL: skip the input
 *         ...
 *     }
 *
 * Each target is one .c file that includes this header once. Built with OX_FUZZ (clang),
 * libFuzzer calls the entry points; in every other build tests/fuzz/replay.c's main feeds
 * them the files of the regression corpus (tests/fuzz/regress/<target>/).
 *
 * The scratch folder is made once per process (under /dev/shm where it exists, else
 * TMPDIR or /tmp), holds the files being read and written, and is removed at exit. External data
 * that a fuzzed .pb names is looked up there, so it can only reach the input file itself.
 */
#ifndef OX_TESTS_FUZZ_H
#define OX_TESTS_FUZZ_H

#include "onnxexec.h"

#include <cblas.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fuzz_dir[256];

/* Removes the scratch folder and the files in it. */
static inline void fuzz_cleanup(void) {
    DIR *d = opendir(fuzz_dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        char p[512];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", fuzz_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(fuzz_dir);
}

/* Sets up what every target needs once: OpenBLAS on the calling thread only, the scratch
 * folder, TMPDIR pointing into it (for code that makes temporary files of its own). */
static inline void fuzz_init(void) {
    openblas_set_num_threads(1);
    if (fuzz_dir[0]) return;
    struct stat sb;
    const char *base = getenv("TMPDIR");
    if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0)
        base = "/dev/shm";
    else if (!base || !*base)
        base = "/tmp";
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/onnxexec-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir)) {
        perror(fuzz_dir);
        abort(); /* the harness itself cannot run */
    }
    setenv("TMPDIR", fuzz_dir, 1);
    atexit(fuzz_cleanup);
}

/* The path of the file `name` in the scratch folder, in buf. */
static inline const char *fuzz_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", fuzz_dir, name);
    return buf;
}

/* data[0..size) as the file `name` in the scratch folder; its path (static: valid until the
 * next call), or NULL when it cannot be written. */
static inline const char *fuzz_file(const char *name, const uint8_t *data, size_t size) {
    static char path[512];
    fuzz_path(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    bool ok = fwrite(data, 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    return ok ? path : NULL;
}

#endif
