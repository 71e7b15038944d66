"""onnxexec from Python: load ONNX (or TorchScript) models and run them with numpy arrays in
and out, through libonnxexec's C API (include/onnxexec.h) and ctypes. No build step, no
dependency but numpy: for test harnesses that check a model's outputs (parity with PyTorch,
with another runtime) without writing C.

    import numpy as np
    import onnxexec

    with onnxexec.Model("net.onnx") as m, m.session(threads=1) as s:
        (y,) = s.run({"x": np.zeros((1, 3, 224, 224), np.float32)})   # or [x], by position
        print(m.inputs, m.outputs, s.memory())

Errors raise onnxexec.Error, whose `status` is the library's code name ("OX_E_SHAPE", ...)
and whose message is the library's (ox_errmsg). Outputs are numpy arrays that own their
data (copied out of the session); a string tensor is an array of str objects; a sequence
output is a list, an optional one a value or None, a map (ZipMap's items) a dict. Inputs
take the same forms: arrays (of str objects for strings), a dict for a map input (int or str
keys, its values converted to the model's value type: DictVectorizer, CastMap) and a list of
dicts for a sequence of maps.

The library is found, in this order: the ONNXEXEC_LIB environment variable (a path to
libonnxexec.so), the library installed beside this module by `cmake --install` (the
module goes to PREFIX/lib/python3/dist-packages), then the system's (libonnxexec.so.1).
"""
import ctypes
import os
import weakref

import numpy as np

__all__ = ["Error", "Model", "Session", "version", "LIBRARY"]

# The library directory relative to this file's, written by `cmake --install`
# (tools/cmake/install.cmake); None in the source tree.
_LIBDIR_FROM_MODULE = None

_MAX_RANK = 16


class _Tensor(ctypes.Structure):
    pass


_Tensor._fields_ = [
    ("dtype", ctypes.c_int),
    ("rank", ctypes.c_int),
    ("dims", ctypes.c_int64 * _MAX_RANK),
    ("data", ctypes.c_void_p),
    ("name", ctypes.c_char_p),
    ("kind", ctypes.c_int),
    ("n_items", ctypes.c_int),
    ("items", ctypes.POINTER(_Tensor)),
]


class _Limits(ctypes.Structure):
    _fields_ = [
        ("model_bytes", ctypes.c_uint64),
        ("tensor_bytes", ctypes.c_uint64),
        ("rank", ctypes.c_int),
        ("nodes", ctypes.c_int64),
        ("subgraph_depth", ctypes.c_int),
        ("string_length", ctypes.c_uint64),
        ("plan_bytes", ctypes.c_uint64),
    ]


class _ModelOptions(ctypes.Structure):
    _fields_ = [
        ("no_optimize", ctypes.c_bool),
        ("standard_ops_only", ctypes.c_bool),
        ("input_shapes", ctypes.POINTER(_Tensor)),
        ("n_input_shapes", ctypes.c_int),
        ("limits", _Limits),
        ("device", ctypes.c_char_p),
    ]


class _SessionOptions(ctypes.Structure):
    _fields_ = [
        ("n_threads", ctypes.c_int),
        ("profile", ctypes.c_bool),
        ("plan_bytes", ctypes.c_uint64),
        ("batch_split", ctypes.c_int),
        ("device", ctypes.c_char_p),
        ("precision", ctypes.c_int),
    ]


_PRECISIONS = {"fp32": 0, "tf32": 1, "fp16": 2, "bf16": 3}


# ox_dtype <-> numpy (as numbered in onnxexec.h: ONNX's TensorProto.DataType)
_TO_NP = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
          7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
          13: np.uint64, 14: np.complex64, 15: np.complex128}
_FROM_NP = {np.dtype(v): k for k, v in _TO_NP.items()}
_IO_TENSOR, _IO_SEQUENCE, _IO_MAP, _IO_OPTIONAL = 0, 1, 2, 3
_STRING = 8


def _load_library():
    tried = []
    names = []
    if os.environ.get("ONNXEXEC_LIB"):
        names.append(os.environ["ONNXEXEC_LIB"])
    if _LIBDIR_FROM_MODULE is not None:
        here = os.path.dirname(os.path.abspath(__file__))
        names.append(os.path.normpath(os.path.join(here, _LIBDIR_FROM_MODULE,
                                                   "libonnxexec.so.1")))
    names.append("libonnxexec.so.1")
    for name in names:
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append("%s (%s)" % (name, e))
    raise ImportError("onnxexec: libonnxexec.so not found; tried " + "; ".join(tried) +
                      ". Install onnxexec (cmake --install), or set ONNXEXEC_LIB to the "
                      "library's path")


_lib, LIBRARY = _load_library()


def _fn(name, res, *args):
    f = getattr(_lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_P = ctypes.c_void_p
_errmsg = _fn("ox_errmsg", ctypes.c_char_p)
_status_name = _fn("ox_status_name", ctypes.c_char_p, ctypes.c_int)
_version = _fn("ox_version", ctypes.c_char_p)
_model_load_with = _fn("ox_model_load_with", ctypes.c_int, ctypes.c_char_p,
                       ctypes.POINTER(_ModelOptions), ctypes.POINTER(_P))
_model_free = _fn("ox_model_free", None, _P)
_model_n_inputs = _fn("ox_model_n_inputs", ctypes.c_int, _P)
_model_n_outputs = _fn("ox_model_n_outputs", ctypes.c_int, _P)
_model_input = _fn("ox_model_input", ctypes.c_int, _P, ctypes.c_int, ctypes.POINTER(_Tensor),
                   ctypes.POINTER(ctypes.c_char_p))
_model_output = _fn("ox_model_output", ctypes.c_int, _P, ctypes.c_int, ctypes.POINTER(_Tensor),
                    ctypes.POINTER(ctypes.c_char_p))
_session_create = _fn("ox_session_create", ctypes.c_int, _P, ctypes.POINTER(_SessionOptions),
                      ctypes.POINTER(_P))
_session_free = _fn("ox_session_free", None, _P)
_session_run = _fn("ox_session_run", ctypes.c_int, _P, ctypes.POINTER(_Tensor), ctypes.c_int,
                   ctypes.POINTER(ctypes.POINTER(_Tensor)))
_session_memory = _fn("ox_session_memory", ctypes.c_int, _P, ctypes.POINTER(ctypes.c_size_t),
                      ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
_session_device = _fn("ox_session_device", ctypes.c_int, _P, ctypes.POINTER(ctypes.c_char_p),
                      ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                      ctypes.POINTER(ctypes.POINTER(ctypes.c_int)),
                      ctypes.POINTER(ctypes.c_bool))


class Error(Exception):
    """A failed call: `status` is the code's name (OX_E_INVALID, OX_E_SHAPE, ...), `code`
    the number, the message the library's."""

    def __init__(self, code, message):
        self.code = code
        self.status = _status_name(code).decode()
        super().__init__("%s: %s" % (self.status, message))


def _check(code):
    if code != 0:
        raise Error(code, (_errmsg() or b"").decode(errors="replace"))


def version():
    """The library's version ("0.1.0")."""
    return _version().decode()


def _describe(fn, handle, i):
    t = _Tensor()
    names = (ctypes.c_char_p * _MAX_RANK)()
    _check(fn(handle, i, ctypes.byref(t), names))
    shape = None
    if 0 <= t.rank <= _MAX_RANK:
        shape = tuple(int(t.dims[k]) if t.dims[k] >= 0 else
                      (names[k].decode() if names[k] else None) for k in range(t.rank))
    dt = _TO_NP.get(t.dtype)
    return (t.name.decode() if t.name else None, np.dtype(dt) if dt else None, shape)


class _Owned:
    """A library handle in self._h, freed by close(): with-blocks and garbage collection."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_h", None):
                self.close()
        except Exception:  # at interpreter exit the module's globals may be gone
            pass


class Model(_Owned):
    """A loaded model. `optimize=False` keeps the graph as the file has it; `device` ("cpu",
    "cuda" or "cuda:N") is where its sessions run by default, and the graph is optimized for
    it (for a GPU, a QDQ model's convolutions, sums and max pools stay float operators that
    the GPU runs; no GPU is needed to load)."""

    def __init__(self, path, optimize=True, device="cpu"):
        self._h = _P()
        self.device = device
        opt = _ModelOptions(no_optimize=not optimize, device=os.fsencode(device))
        _check(_model_load_with(os.fsencode(path), ctypes.byref(opt), ctypes.byref(self._h)))
        self.path = path
        self._sessions = weakref.WeakSet()  # closed before the model is freed
        n_in, n_out = _model_n_inputs(self._h), _model_n_outputs(self._h)
        # [(name, numpy dtype, shape)]: a dim that is not fixed is its symbol (str) or None
        self.inputs = [_describe(_model_input, self._h, i) for i in range(n_in)]
        self.outputs = [_describe(_model_output, self._h, i) for i in range(n_out)]

    def session(self, threads=0, device=None, precision="fp32"):
        """A session that runs this model (threads: 0 for the number of cores; device "cpu",
        "cuda" or "cuda:N", None for the model's; precision on a GPU "fp32", "tf32", "fp16"
        or "bf16")."""
        return Session(self, threads, self.device if device is None else device, precision)

    def run(self, inputs, threads=0):
        """One run in a session of its own."""
        with self.session(threads) as s:
            return s.run(inputs)

    def close(self):
        """Free the model (and close its sessions first); closing twice is fine."""
        if self._h:
            for s in list(self._sessions):
                s.close()
            _model_free(self._h)
            self._h = _P()


def _as_value(name, v, keep, dtype=None):
    """A tensor, or for a dict a map (values as `dtype` when known) and for a list of dicts
    a sequence of maps."""
    if isinstance(v, dict):
        keys = list(v)
        strings = any(isinstance(k, str) for k in keys)
        vals = list(v.values())
        vdt = object if any(isinstance(x, str) for x in vals) else dtype
        items = (_Tensor * 2)(
            _as_tensor(None, np.array(keys, dtype=object if strings else np.int64), keep),
            _as_tensor(None, np.array(vals, dtype=vdt) if vals else np.zeros(0, vdt or np.float32),
                       keep))
        t = _Tensor(kind=_IO_MAP, dtype=items[1].dtype, n_items=2, items=items)
    elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        items = (_Tensor * len(v))(*[_as_value(None, x, keep, dtype) for x in v])
        t = _Tensor(kind=_IO_SEQUENCE, dtype=items[0].dtype, n_items=len(v), items=items)
    else:
        return _as_tensor(name, v, keep)
    keep.append(items)
    if name is not None:
        n = name.encode()
        keep.append(n)
        t.name = n
    return t


def _as_tensor(name, a, keep):
    a = np.asarray(a)
    if not a.flags.c_contiguous:  # (np.ascontiguousarray would make a scalar 1-D)
        a = a.copy(order="C")
    if a.dtype == object or a.dtype.kind == "U":  # strings: an array of char pointers
        b = [(x if isinstance(x, str) else str(x)).encode() for x in a.ravel().tolist()]
        ptrs = (ctypes.c_char_p * max(len(b), 1))(*b)
        keep.extend([b, ptrs])
        t = _Tensor(dtype=_STRING, rank=a.ndim)
        for k, d in enumerate(a.shape):
            t.dims[k] = d
        t.data = ctypes.cast(ptrs, ctypes.c_void_p) if b else None
        if name is not None:
            n = name.encode()
            keep.append(n)
            t.name = n
        return t
    if a.dtype not in _FROM_NP:
        raise TypeError("onnxexec: input %s: numpy dtype %s is not supported (%s)"
                        % (name, a.dtype, ", ".join(sorted(str(d) for d in _FROM_NP))))
    if a.ndim > _MAX_RANK:
        raise ValueError("onnxexec: input %s: rank %d is over %d" % (name, a.ndim, _MAX_RANK))
    keep.append(a)
    t = _Tensor(dtype=_FROM_NP[a.dtype], rank=a.ndim)
    for k, d in enumerate(a.shape):
        t.dims[k] = d
    t.data = a.ctypes.data if a.size else None
    if name is not None:
        n = name.encode()
        keep.append(n)
        t.name = n
    return t


def _to_numpy(t):
    if t.kind == _IO_SEQUENCE:
        return [_to_numpy(t.items[i]) for i in range(t.n_items)]
    if t.kind == _IO_OPTIONAL:
        return _to_numpy(t.items[0]) if t.n_items else None
    if t.kind == _IO_MAP:
        return dict(zip(_to_numpy(t.items[0]).tolist(), _to_numpy(t.items[1]).tolist()))
    if t.kind != _IO_TENSOR:
        raise Error(-2, "an output of kind %d is not returned to Python" % t.kind)
    if t.dtype == _STRING:
        shape = tuple(int(t.dims[k]) for k in range(t.rank))
        n = int(np.prod(shape, dtype=np.int64))
        ptrs = ctypes.cast(t.data, ctypes.POINTER(ctypes.c_char_p)) if n and t.data else None
        items = [(ptrs[i] or b"").decode("utf-8", "replace") for i in range(n)]
        return np.array(items, dtype=object).reshape(shape)
    dt = _TO_NP.get(t.dtype)
    if dt is None:
        raise Error(-2, "output dtype %d has no numpy equivalent here" % t.dtype)
    shape = tuple(int(t.dims[k]) for k in range(t.rank))
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0 or not t.data:
        return np.zeros(shape, dt)
    nbytes = n * np.dtype(dt).itemsize
    buf = (ctypes.c_char * nbytes).from_address(t.data)
    return np.frombuffer(buf, dtype=dt).reshape(shape).copy()


class Session(_Owned):
    """Runs a model; plans are cached per input shape (see ox_session_create)."""

    def __init__(self, model, threads=0, device="cpu", precision="fp32"):
        if not model._h:
            raise ValueError("onnxexec: the model is closed")
        if precision not in _PRECISIONS:
            raise ValueError("onnxexec: precision %r: expected one of %s"
                             % (precision, ", ".join(_PRECISIONS)))
        self.model = model  # the session borrows the model: keep it alive
        self._h = _P()
        self._device = os.fsencode(device)  # kept alive while C may read it
        opt = _SessionOptions(n_threads=threads, device=self._device,
                              precision=_PRECISIONS[precision])
        _check(_session_create(model._h, ctypes.byref(opt), ctypes.byref(self._h)))
        model._sessions.add(self)

    def run(self, inputs):
        """inputs: {name: array} or a list of arrays (by position). Returns the outputs as a
        list of numpy arrays, in the model's output order."""
        if not self._h:
            raise ValueError("onnxexec: the session is closed")
        keep = []
        types = {name: dt for name, dt, _ in self.model.inputs}
        if isinstance(inputs, dict):
            ts = [_as_value(k, v, keep, types.get(k)) for k, v in inputs.items()]
        else:
            ts = [_as_value(None, v, keep, self.model.inputs[i][1] if i < len(self.model.inputs)
                            else None) for i, v in enumerate(inputs)]
        arr = (_Tensor * max(len(ts), 1))(*ts)
        n_out = len(self.model.outputs)
        outs = (ctypes.POINTER(_Tensor) * max(n_out, 1))()
        _check(_session_run(self._h, arr, len(ts), outs))
        return [_to_numpy(outs[i].contents) for i in range(n_out)]

    def memory(self):
        """The last run's memory plan: {'arena', 'no_reuse', 'lower_bound'} in bytes."""
        a, b, c = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_size_t()
        _check(_session_memory(self._h, ctypes.byref(a), ctypes.byref(b), ctypes.byref(c)))
        return {"arena": a.value, "no_reuse": b.value, "lower_bound": c.value}

    def device(self):
        """Where the session runs and how its last plan ran: {'device': 'cpu' or 'cuda:0
        (NVIDIA ...)', 'device_steps', 'cpu_steps' (on a GPU, the nodes without a GPU
        kernel), 'graph_replay' (runs replay one captured CUDA graph)}."""
        if not self._h:
            raise ValueError("onnxexec: the session is closed")
        name, nd, nc = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_int()
        nodes, cap = ctypes.POINTER(ctypes.c_int)(), ctypes.c_bool()
        _check(_session_device(self._h, ctypes.byref(name), ctypes.byref(nd), ctypes.byref(nc),
                               ctypes.byref(nodes), ctypes.byref(cap)))
        return {"device": name.value.decode(), "device_steps": nd.value,
                "cpu_steps": nc.value, "graph_replay": cap.value}

    def close(self):
        if self._h:
            _session_free(self._h)
            self._h = _P()
