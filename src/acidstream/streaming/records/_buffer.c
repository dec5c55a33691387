/* RecordBuffer: the per-record path of StreamingConnection.write() in C.
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
    .tp_name = "acidstream.streaming.records._buffer.CRecordBuffer",
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

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "acidstream.streaming.records._buffer",
    .m_doc = "write()'s per-record path in C (see acidstream.streaming.records.buffer).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__buffer(void)
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
