/* anchorfs._statmatch: the warm drift check's stat loop, in C and off the GIL.
 *
 * A warm drift pass is one lstat per anchored file compared with the hash cache's entry.
 * From Python that costs a bare stat loop at best, and threads do not help: every short
 * syscall hands the GIL back and forth. Here the loop runs with the GIL released, split
 * over a few threads for large batches, as git's preloaded index does. Optional: without
 * a C compiler the package falls back to the pure-Python loop in hashing.py, which gives
 * the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    pthread_t threads[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    Py_ssize_t k = n / MIN_PER_THREAD;
    if (k > MAX_THREADS)
        k = MAX_THREADS;
    if (cpus > 0 && k > cpus)
        k = cpus;
    if (k < 1)
        k = 1;
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
    for (Py_ssize_t t = 1; t < k; t++) /* a thread that cannot start leaves its share to this one */
        started[t] = pthread_create(&threads[t], NULL, run_job, &jobs[t]) == 0;
    run_job(&jobs[0]);
    for (Py_ssize_t t = 1; t < k; t++) {
        if (started[t])
            pthread_join(threads[t], NULL);
        else
            run_job(&jobs[t]);
    }
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

static PyMethodDef methods[] = {
    {"pack", pack, METH_O, pack_doc},
    {"match", match, METH_VARARGS, match_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "anchorfs._statmatch",
    "The warm drift check's lstat-and-compare loop, off the GIL.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__statmatch(void) { return PyModule_Create(&module); }
