/* anchorfs.drift._statmatch: the drift check's per-file loops, in C and off the GIL.
 *
 * A warm drift pass is one lstat per anchored file compared with the hash cache's entry
 * (`match`); a pass past the cache's TTL reads every anchored file again (`reread`). From
 * Python each costs a bare syscall loop at best, and threads do not help: every short
 * syscall hands the GIL back and forth. Here the loops run with the GIL released, split
 * over a few threads for large batches, as git's preloaded index does. Optional: without
 * a C compiler the package falls back to the pure-Python loops in hashing.py and guard.py,
 * which give the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#if defined(SYS_openat2)
#include <linux/openat2.h>
#define HAVE_OPENAT2 1
#endif
#endif

#if defined(__APPLE__)
#define MTIM st_mtimespec
#define CTIM st_ctimespec
#else
#define MTIM st_mtim
#define CTIM st_ctim
#endif

typedef struct {
    int64_t size, mtime_ns, ctime_ns;
    uint64_t ino;
} key_t4;

typedef struct {
    const char **paths;
    const key_t4 *keys;
    char *out;
    Py_ssize_t lo, hi;
    int failed; /* an lstat failed: the caller goes one file at a time */
} job_t;

#define MIN_PER_THREAD 2048
#define MAX_THREADS 4

/* How many threads share a batch of n: one per `per_thread` items, at most MAX_THREADS and the
 * CPUs online, at least one. */
static Py_ssize_t shares(Py_ssize_t n, Py_ssize_t per_thread) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    Py_ssize_t k = n / per_thread;
    if (k > MAX_THREADS)
        k = MAX_THREADS;
    if (cpus > 0 && k > cpus)
        k = cpus;
    return k < 1 ? 1 : k;
}

/* Run `fn` on each of the k jobs (`size` bytes apart from `jobs`): the first here, the others on
 * threads; a thread that cannot start leaves its share to this one. Called without the GIL. */
static void run_shares(void *(*fn)(void *), void *jobs, size_t size, Py_ssize_t k) {
    pthread_t threads[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (Py_ssize_t t = 1; t < k; t++)
        started[t] = pthread_create(&threads[t], NULL, fn, (char *)jobs + (size_t)t * size) == 0;
    fn(jobs);
    for (Py_ssize_t t = 1; t < k; t++) {
        if (started[t])
            pthread_join(threads[t], NULL);
        else
            fn((char *)jobs + (size_t)t * size);
    }
}

static void *run_job(void *arg) {
    job_t *job = (job_t *)arg;
    struct stat st;
    for (Py_ssize_t i = job->lo; i < job->hi; i++) {
        if (lstat(job->paths[i], &st) != 0) {
            job->failed = 1;
            job->out[i] = 0;
            continue;
        }
        const key_t4 *k = &job->keys[i];
        int64_t mtime = (int64_t)st.MTIM.tv_sec * 1000000000LL + st.MTIM.tv_nsec;
        int64_t ctime = (int64_t)st.CTIM.tv_sec * 1000000000LL + st.CTIM.tv_nsec;
        job->out[i] = (char)((int64_t)st.st_size == k->size && mtime == k->mtime_ns &&
                             ctime == k->ctime_ns && (uint64_t)st.st_ino == k->ino);
    }
    return NULL;
}

PyDoc_STRVAR(pack_doc,
"pack(keys) -> bytes | None\n\n"
"Pack (size, mtime_ns, ctime_ns, inode) tuples for match(); None if one does not fit.");

static PyObject *pack(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "keys must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *buf = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(key_t4));
    if (buf == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    key_t4 *keys = (key_t4 *)PyBytes_AS_STRING(buf);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = items[i];
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4)
            goto unfit;
        long long a = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 0));
        long long b = a == -1 && PyErr_Occurred() ? 0 : PyLong_AsLongLong(PyTuple_GET_ITEM(t, 1));
        long long c = PyErr_Occurred() ? 0 : PyLong_AsLongLong(PyTuple_GET_ITEM(t, 2));
        unsigned long long d = PyErr_Occurred() ? 0 : PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 3));
        if (PyErr_Occurred())
            goto unfit;
        keys[i].size = a;
        keys[i].mtime_ns = b;
        keys[i].ctime_ns = c;
        keys[i].ino = d;
    }
    Py_DECREF(seq);
    return buf;
unfit: /* not ints, or out of range: not this module's business, Python compares those */
    PyErr_Clear();
    Py_DECREF(seq);
    Py_DECREF(buf);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(match_doc,
"match(paths, packed) -> bytes | None\n\n"
"lstat each path and compare with its packed key: one byte per path, 1 where all four\n"
"fields match. None when a path is not a plain str or an lstat failed, so the caller\n"
"goes one file at a time as it would after an OSError.");

static PyObject *match(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *paths_arg;
    Py_buffer packed;
    if (!PyArg_ParseTuple(args, "Oy*:match", &paths_arg, &packed))
        return NULL;
    PyObject *result = NULL;
    /* a tuple copy: the strs (and their UTF-8 buffers) stay alive while the GIL is released */
    PyObject *paths = PySequence_Tuple(paths_arg);
    if (paths == NULL)
        goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(paths);
    if (packed.len != n * (Py_ssize_t)sizeof(key_t4)) {
        PyErr_SetString(PyExc_ValueError, "paths and keys differ in length");
        goto done;
    }
    const char **cpaths = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(char *));
    if (cpaths == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyTuple_GET_ITEM(paths, i);
        Py_ssize_t len;
        const char *s = PyUnicode_Check(p) ? PyUnicode_AsUTF8AndSize(p, &len) : NULL;
        if (s == NULL || (Py_ssize_t)strlen(s) != len) {
            /* None, a surrogate-escaped name or an embedded NUL: Python's own loop decides */
            PyErr_Clear();
            PyMem_Free(cpaths);
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        cpaths[i] = s;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL) {
        PyMem_Free(cpaths);
        goto done;
    }
    job_t jobs[MAX_THREADS];
    Py_ssize_t k = shares(n, MIN_PER_THREAD);
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < k; t++) {
        jobs[t].paths = cpaths;
        jobs[t].keys = (const key_t4 *)packed.buf;
        jobs[t].out = PyBytes_AS_STRING(out);
        jobs[t].lo = n * t / k;
        jobs[t].hi = n * (t + 1) / k;
        jobs[t].failed = 0;
    }
    run_shares(run_job, jobs, sizeof jobs[0], k);
    for (Py_ssize_t t = 0; t < k; t++)
        failed |= jobs[t].failed;
    Py_END_ALLOW_THREADS
    PyMem_Free(cpaths);
    if (failed) {
        Py_DECREF(out);
        result = Py_None;
        Py_INCREF(result);
    } else {
        result = out;
    }
done:
    Py_XDECREF(paths);
    PyBuffer_Release(&packed);
    return result;
}

/* ---- reread: the guarded open, read and re-check of files whose stat is known ------------ */

#if defined(HAVE_OPENAT2)

#define READ_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
#define MIN_READS_PER_THREAD 512

typedef struct {
    int rootfd;       /* an O_PATH fd of the root, confirmed at its realpath: openat2's anchor */
    const char **rels;
    const key_t4 *keys;
    char **bufs;      /* the bytes objects' buffers, each its key's size + the trailing NUL */
    char *ok;
    Py_ssize_t lo, hi;
    int unavailable;  /* openat2 refused as a call (ENOSYS, a seccomp EPERM): the batch is Python's */
} read_job_t;

static int same_key(const struct stat *st, const key_t4 *k) {
    int64_t mtime = (int64_t)st->MTIM.tv_sec * 1000000000LL + st->MTIM.tv_nsec;
    int64_t ctime = (int64_t)st->CTIM.tv_sec * 1000000000LL + st->CTIM.tv_nsec;
    return (int64_t)st->st_size == k->size && mtime == k->mtime_ns && ctime == k->ctime_ns &&
           (uint64_t)st->st_ino == k->ino;
}

/* Whether `rel` may be opened here at all: relative, no empty, `.` or `..` part, and not in the
 * state folder. A first part outside ASCII is refused too: only Python's `is_state_name` can
 * judge its Unicode folding, so such a file goes the Python way. */
static int plain_rel(const char *rel) {
    if (rel[0] == '\0' || rel[0] == '/')
        return 0;
    const char *part = rel;
    int first = 1;
    for (;;) {
        const char *end = strchr(part, '/');
        size_t len = end ? (size_t)(end - part) : strlen(part);
        if (len == 0 || (len == 1 && part[0] == '.') || (len == 2 && part[0] == '.' && part[1] == '.'))
            return 0;
        if (first) {
            for (size_t i = 0; i < len; i++)
                if ((unsigned char)part[i] >= 0x80)
                    return 0;
            if (len == 9 && strncasecmp(part, ".anchorfs", 9) == 0)
                return 0;
            first = 0;
        }
        if (!end)
            return 1;
        part = end + 1;
    }
}

static void *run_read_job(void *arg) {
    read_job_t *job = (read_job_t *)arg;
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = READ_FLAGS;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    for (Py_ssize_t i = job->lo; i < job->hi && !job->unavailable; i++) {
        job->ok[i] = 0;
        if (job->bufs[i] == NULL)
            continue;
        const key_t4 *k = &job->keys[i];
        int fd = (int)syscall(SYS_openat2, job->rootfd, job->rels[i], &how, sizeof how);
        if (fd < 0) {
            if (errno == ENOSYS || errno == EPERM || errno == E2BIG)
                job->unavailable = 1;
            continue;
        }
        struct stat st;
        int good = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && same_key(&st, k);
        if (good) {
            /* one read of size + 1 (the NUL every bytes object ends with takes the extra byte):
             * exactly the size, or the file is not the one its stat described */
            ssize_t got = read(fd, job->bufs[i], (size_t)k->size + 1);
            good = got == (ssize_t)k->size && fstat(fd, &st) == 0 && same_key(&st, k);
            job->bufs[i][k->size] = '\0';
        }
        close(fd);
        job->ok[i] = (char)good;
    }
    return NULL;
}

PyDoc_STRVAR(reread_doc,
"reread(root, rels, packed, limit) -> list[bytes | None] | None\n\n"
"Read again each file under `root` (a realpath) whose stat the caller knows (its packed key),\n"
"with the guarded open's checks made by the kernel: openat2 beneath root with no link anywhere\n"
"on the way (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), O_NOFOLLOW | O_NONBLOCK, a regular file\n"
"whose fstat is the key before and after one read of exactly its size. Per file its bytes, or\n"
"None where any check failed, the file is larger than `limit`, or its path is not plain or is\n"
"in the state folder. None for the whole batch when root cannot be opened as itself, a name is\n"
"not a plain str, or the kernel refuses openat2: the caller goes one file at a time through\n"
"the guarded open.");

static PyObject *reread(PyObject *self, PyObject *args) {
    (void)self;
    const char *root;
    Py_ssize_t root_len;
    PyObject *rels_arg;
    Py_buffer packed;
    long long limit;
    if (!PyArg_ParseTuple(args, "s#Oy*L:reread", &root, &root_len, &rels_arg, &packed, &limit))
        return NULL;
    PyObject *result = NULL, *rels = NULL;
    const char **crels = NULL;
    char **bufs = NULL;
    char *ok = NULL;
    PyObject **objs = NULL;
    int rootfd = -1;
    Py_ssize_t n = 0;
    rels = PySequence_Tuple(rels_arg);
    if (rels == NULL)
        goto done;
    n = PyTuple_GET_SIZE(rels);
    if (packed.len != n * (Py_ssize_t)sizeof(key_t4)) {
        PyErr_SetString(PyExc_ValueError, "rels and keys differ in length");
        goto done;
    }
    if (root_len < 1 || root[0] != '/' || (size_t)root_len != strlen(root) ||
        (root_len > 1 && root[root_len - 1] == '/'))
        goto fallback;
    crels = PyMem_Calloc((size_t)(n ? n : 1), sizeof(char *));
    bufs = PyMem_Calloc((size_t)(n ? n : 1), sizeof(char *));
    objs = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    ok = PyMem_Calloc((size_t)(n ? n : 1), 1);
    if (crels == NULL || bufs == NULL || objs == NULL || ok == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const key_t4 *keys = (const key_t4 *)packed.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyTuple_GET_ITEM(rels, i);
        Py_ssize_t len;
        const char *s = PyUnicode_Check(p) ? PyUnicode_AsUTF8AndSize(p, &len) : NULL;
        if (s == NULL || (Py_ssize_t)strlen(s) != len) {
            PyErr_Clear();
            goto fallback;
        }
        crels[i] = s;
        if (keys[i].size < 0 || keys[i].size > limit || !plain_rel(s))
            continue; /* None for this one: never opened */
        objs[i] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)keys[i].size);
        if (objs[i] == NULL)
            goto done;
        bufs[i] = PyBytes_AS_STRING(objs[i]);
    }
    /* the root itself, as the guard's place check holds it: opened without following a link,
     * and its fd's place the realpath given (a folder above it swapped for a link moves it) */
    rootfd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0)
        goto fallback;
    {
        char proc[64], seen[4096];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", rootfd);
        ssize_t got = readlink(proc, seen, sizeof seen);
        if (got >= 0 && (got != root_len || memcmp(seen, root, (size_t)got) != 0))
            goto fallback;
    }
    read_job_t jobs[MAX_THREADS];
    Py_ssize_t k = shares(n, MIN_READS_PER_THREAD);
    int unavailable = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < k; t++) {
        read_job_t job = {rootfd, crels, keys, bufs, ok, n * t / k, n * (t + 1) / k, 0};
        jobs[t] = job;
    }
    run_shares(run_read_job, jobs, sizeof jobs[0], k);
    for (Py_ssize_t t = 0; t < k; t++)
        unavailable |= jobs[t].unavailable;
    Py_END_ALLOW_THREADS
    if (unavailable)
        goto fallback;
    result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = ok[i] ? objs[i] : Py_None;
        Py_INCREF(item);
        PyList_SET_ITEM(result, i, item);
    }
    goto done;
fallback:
    PyErr_Clear();
    result = Py_None;
    Py_INCREF(result);
done:
    if (rootfd >= 0)
        close(rootfd);
    if (objs != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(objs[i]);
    PyMem_Free(objs);
    PyMem_Free(bufs);
    PyMem_Free(crels);
    PyMem_Free(ok);
    Py_XDECREF(rels);
    PyBuffer_Release(&packed);
    return result;
}

#endif /* HAVE_OPENAT2 */

static PyMethodDef methods[] = {
    {"pack", pack, METH_O, pack_doc},
    {"match", match, METH_VARARGS, match_doc},
#if defined(HAVE_OPENAT2)
    {"reread", reread, METH_VARARGS, reread_doc},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "anchorfs.drift._statmatch",
    "The drift check's lstat-and-compare and guarded re-read loops, off the GIL.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__statmatch(void) { return PyModule_Create(&module); }
