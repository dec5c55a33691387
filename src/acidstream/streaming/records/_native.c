/* The record path's two loops over single records, in C (acidstream.streaming.records._native).
 *
 * RecordBuffer: the per-record path of StreamingConnection.write().
 *
 * A streaming client calls write() once per record, so its cost is paid ~10^6 times a second: as a Python
 * method (a type check, a room check, a list append) it costs ~75 ns, more than a tenth of a whole commit's
 * work; as this builtin method ~25 ns. The record's bytes are copied at once into one contiguous buffer with
 * int64 offsets: a caller may reuse its buffer after write() returns, and the buffered records are already an
 * Arrow large_binary array's two buffers when they are parsed, with no per-record pass to build one.
 *
 * append(record) takes plain bytes while the buffer has room (records and bytes); anything else, and every
 * record when the room is 0 (no open transaction), goes to the ``overflow`` callable given at construction,
 * which checks, converts and stores it with add() (unconditionally) or raises.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t size, capacity;   /* bytes used and allocated in data */
    int64_t *offsets;            /* offsets[0] = 0, offsets[i + 1] = end of record i */
    Py_ssize_t count, slots;     /* records held; int64 slots allocated in offsets */
    Py_ssize_t room_records, room_bytes;  /* the fast path takes a record while count < room_records and the
                                             bytes stay <= room_bytes */
    PyObject *overflow;
} RecordBuffer;

static int
reserve(RecordBuffer *self, Py_ssize_t more_bytes)
{
    if (self->count + 2 > self->slots) {
        Py_ssize_t slots = self->slots ? self->slots * 2 : 1024;
        int64_t *offsets = PyMem_Realloc(self->offsets, (size_t)slots * sizeof(int64_t));
        if (offsets == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (self->slots == 0)
            offsets[0] = 0;
        self->offsets = offsets;
        self->slots = slots;
    }
    if (self->size + more_bytes > self->capacity) {
        Py_ssize_t capacity = self->capacity ? self->capacity : 1 << 16;
        while (capacity < self->size + more_bytes) {
            if (capacity > PY_SSIZE_T_MAX / 2) {
                PyErr_NoMemory();
                return -1;
            }
            capacity *= 2;
        }
        char *data = PyMem_Realloc(self->data, (size_t)capacity);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->data = data;
        self->capacity = capacity;
    }
    return 0;
}

static int
store(RecordBuffer *self, const char *bytes, Py_ssize_t len)
{
    if (reserve(self, len) < 0)
        return -1;
    memcpy(self->data + self->size, bytes, (size_t)len);
    self->size += len;
    self->offsets[++self->count] = self->size;
    return 0;
}

static PyObject *
RecordBuffer_append(RecordBuffer *self, PyObject *record)
{
    if (PyBytes_CheckExact(record) && self->count < self->room_records) {
        Py_ssize_t len = PyBytes_GET_SIZE(record);
        if (len <= self->room_bytes - self->size) {
            if (store(self, PyBytes_AS_STRING(record), len) < 0)
                return NULL;
            Py_RETURN_NONE;
        }
    }
    if (self->overflow == NULL) {
        PyErr_SetString(PyExc_ValueError, "RecordBuffer has no overflow callable (not initialised)");
        return NULL;
    }
    return PyObject_CallOneArg(self->overflow, record);
}

static PyObject *
RecordBuffer_add(RecordBuffer *self, PyObject *record)
{
    Py_buffer view;
    if (PyObject_GetBuffer(record, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int failed = store(self, view.buf, view.len);
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
RecordBuffer_set_room(RecordBuffer *self, PyObject *args)
{
    Py_ssize_t records, bytes;
    if (!PyArg_ParseTuple(args, "nn:set_room", &records, &bytes))
        return NULL;
    self->room_records = records;
    self->room_bytes = bytes;
    Py_RETURN_NONE;
}

/* (data, offsets): the records as an Arrow large_binary array's buffers (offsets as int64 bytes), and the
 * buffer emptied. Its memory is kept for the next records unless it grew past 64 MiB. */
static PyObject *
RecordBuffer_take_buffers(RecordBuffer *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *data = PyBytes_FromStringAndSize(self->data, self->size);
    if (data == NULL)
        return NULL;
    int64_t zero = 0;  /* no records: one offset, and offsets may not be allocated yet */
    PyObject *offsets = PyBytes_FromStringAndSize(
        self->count ? (const char *)self->offsets : (const char *)&zero,
        (Py_ssize_t)((self->count + 1) * sizeof(int64_t)));
    if (offsets == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    self->size = 0;
    self->count = 0;
    if (self->capacity > (64 << 20)) {
        PyMem_Free(self->data);
        self->data = NULL;
        self->capacity = 0;
        PyMem_Free(self->offsets);
        self->offsets = NULL;
        self->slots = 0;
    }
    return Py_BuildValue("(NN)", data, offsets);
}

static PyObject *
RecordBuffer_clear(RecordBuffer *self, PyObject *Py_UNUSED(ignored))
{
    self->size = 0;
    self->count = 0;
    Py_RETURN_NONE;
}

static Py_ssize_t
RecordBuffer_len(RecordBuffer *self)
{
    return self->count;
}

static PyObject *
RecordBuffer_get_nbytes(RecordBuffer *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->size);
}

static int
RecordBuffer_init(RecordBuffer *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"overflow", NULL};
    PyObject *overflow;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:RecordBuffer", kwlist, &overflow))
        return -1;
    if (!PyCallable_Check(overflow)) {
        PyErr_SetString(PyExc_TypeError, "overflow must be callable");
        return -1;
    }
    Py_INCREF(overflow);
    Py_XSETREF(self->overflow, overflow);
    return 0;
}

static int
RecordBuffer_traverse(RecordBuffer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->overflow);
    return 0;
}

static int
RecordBuffer_clear_refs(RecordBuffer *self)
{
    Py_CLEAR(self->overflow);
    return 0;
}

static void
RecordBuffer_dealloc(RecordBuffer *self)
{
    PyObject_GC_UnTrack(self);
    RecordBuffer_clear_refs(self);
    PyMem_Free(self->data);
    PyMem_Free(self->offsets);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef RecordBuffer_methods[] = {
    {"append", (PyCFunction)RecordBuffer_append, METH_O,
     "append(record): buffer plain bytes while there is room, else hand the record to overflow."},
    {"add", (PyCFunction)RecordBuffer_add, METH_O, "add(record): buffer a copy of any bytes-like record."},
    {"set_room", (PyCFunction)RecordBuffer_set_room, METH_VARARGS,
     "set_room(records, bytes): how much append() may buffer before it calls overflow."},
    {"take_buffers", (PyCFunction)RecordBuffer_take_buffers, METH_NOARGS,
     "take_buffers() -> (data, offsets): the records as large_binary buffers; the buffer is emptied."},
    {"clear", (PyCFunction)RecordBuffer_clear, METH_NOARGS, "clear(): drop the buffered records."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef RecordBuffer_getset[] = {
    {"nbytes", (getter)RecordBuffer_get_nbytes, NULL, "bytes of the buffered records", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods RecordBuffer_as_sequence = {
    .sq_length = (lenfunc)RecordBuffer_len,
};

static PyTypeObject RecordBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "acidstream.streaming.records._native.CRecordBuffer",
    .tp_doc = "Records copied into one buffer with int64 offsets; append() is write()'s per-record path.",
    .tp_basicsize = sizeof(RecordBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RecordBuffer_init,
    .tp_dealloc = (destructor)RecordBuffer_dealloc,
    .tp_traverse = (traverseproc)RecordBuffer_traverse,
    .tp_clear = (inquiry)RecordBuffer_clear_refs,
    .tp_methods = RecordBuffer_methods,
    .tp_getset = RecordBuffer_getset,
    .tp_as_sequence = &RecordBuffer_as_sequence,
};

/* split_uniform(data, offsets, separator, count): each record (data[offsets[r]:offsets[r + 1]], offsets int64)
 * cut on the one-byte separator into exactly ``count`` fields; per field (offsets, data) as the buffers of an
 * Arrow large_string/large_binary array: field bytes copied contiguously, offsets int64 from 0. None as soon
 * as a record holds another number of separators (the caller then takes its general path).
 *
 * One memchr pass finds the separators, one memcpy pass gathers the fields, both without the GIL. The numpy
 * form of the same split (comparisons over every byte, a gather per field) costs ~6x as much. */
static PyObject *
split_uniform(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer data, offs;
    int separator;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*y*in:split_uniform", &data, &offs, &separator, &count))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t *starts = NULL;    /* per record, the start of each field after the first */
    int64_t *lengths = NULL;      /* per field, its bytes in all */
    PyObject **buffers = NULL;    /* per field, (offsets, data) bytes */
    const int64_t *offsets = (const int64_t *)offs.buf;
    Py_ssize_t n = offs.len / (Py_ssize_t)sizeof(int64_t) - 1;
    Py_ssize_t k = count - 1;
    const char *base = (const char *)data.buf;
    int malformed = 0, mismatch = 0;

    if (count < 1 || separator < 0 || separator > 255 || n < 0 || offs.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "split_uniform: count >= 1, a byte separator and n + 1 int64 offsets");
        goto done;
    }
    if ((k && (size_t)n > PY_SSIZE_T_MAX / sizeof(Py_ssize_t) / (size_t)k)) {
        PyErr_NoMemory();
        goto done;
    }
    starts = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n * k + 1));
    lengths = PyMem_Calloc((size_t)count, sizeof(int64_t));
    buffers = PyMem_Calloc((size_t)count * 2, sizeof(PyObject *));
    if (starts == NULL || lengths == NULL || buffers == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n && !malformed && !mismatch; r++) {
        int64_t lo = offsets[r], hi = offsets[r + 1];
        if (lo < 0 || hi < lo || hi > data.len) {
            malformed = 1;
            break;
        }
        const char *p = base + lo, *end = base + hi;
        Py_ssize_t *mine = starts + r * k;
        for (Py_ssize_t i = 0; i < k; i++) {
            const char *at = memchr(p, separator, (size_t)(end - p));
            if (at == NULL) {
                mismatch = 1;
                break;
            }
            lengths[i] += at - p;
            mine[i] = at + 1 - base;
            p = at + 1;
        }
        if (!mismatch && memchr(p, separator, (size_t)(end - p)) != NULL)
            mismatch = 1;
        lengths[k] += end - p;
    }
    Py_END_ALLOW_THREADS
    if (malformed) {
        PyErr_SetString(PyExc_ValueError, "split_uniform: offsets out of order or beyond the data");
        goto done;
    }
    if (mismatch) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        buffers[2 * i] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((n + 1) * sizeof(int64_t)));
        buffers[2 * i + 1] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)lengths[i]);
        if (buffers[2 * i] == NULL || buffers[2 * i + 1] == NULL)
            goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t *out_offsets = (int64_t *)PyBytes_AS_STRING(buffers[2 * i]);
        char *out = PyBytes_AS_STRING(buffers[2 * i + 1]);
        int64_t at = 0;
        out_offsets[0] = 0;
        for (Py_ssize_t r = 0; r < n; r++) {
            Py_ssize_t from = i == 0 ? (Py_ssize_t)offsets[r] : starts[r * k + i - 1];
            Py_ssize_t to = i == k ? (Py_ssize_t)offsets[r + 1] : starts[r * k + i] - 1;
            memcpy(out + at, base + from, (size_t)(to - from));
            at += to - from;
            out_offsets[r + 1] = at;
        }
    }
    Py_END_ALLOW_THREADS
    result = PyList_New(count);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PyTuple_Pack(2, buffers[2 * i], buffers[2 * i + 1]);
        if (pair == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, pair);
    }
done:
    if (buffers != NULL) {
        for (Py_ssize_t i = 0; i < 2 * count; i++)
            Py_XDECREF(buffers[i]);
    }
    PyMem_Free(buffers);
    PyMem_Free(lengths);
    PyMem_Free(starts);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    return result;
}

static PyMethodDef module_functions[] = {
    {"split_uniform", (PyCFunction)split_uniform, METH_VARARGS,
     "split_uniform(data, offsets, separator, count) -> [(offsets, data)] * count, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "acidstream.streaming.records._native",
    .m_doc = "write()'s per-record path and the delimited split, in C (see records.buffer, records.text_values).",
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&RecordBufferType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RecordBufferType);
    if (PyModule_AddObject(m, "CRecordBuffer", (PyObject *)&RecordBufferType) < 0) {
        Py_DECREF(&RecordBufferType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
