# cython: language_level=3, boundscheck=False, wraparound=False
"""Native dispatcher of the cython backend (compiled once, when the plugin is installed).

:func:`make_kernel` turns a call plan (a JSON-compatible dict made by
:mod:`tilelang_backend_cython.plan`) plus a compiled kernel library into a ``CythonKernel``: a
callable whose call path (vectorcall, the optional _torch_reader or DLPack's C exchange API,
validation in C) is in ``_dispatch_core.h``. This module only fills the plan's C structures; it never runs per call.
"""

from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF
from libc.limits cimport LLONG_MAX
from libc.string cimport strncpy

import os

from tilelang_core.calling import symbol_high

cdef extern from "_dispatch_core.h":
    int TL_MAX_NDIM
    int TL_MAX_PARAMS
    int TL_DL_CPU
    int TL_DL_CUDA

    ctypedef struct tl_dl_version:
        unsigned int major
        unsigned int minor

    ctypedef struct tl_dl_api_header:
        tl_dl_version version

    ctypedef struct tl_dl_tensor:
        pass

    ctypedef int (*tl_dl_tensor_from_py_fn)(void *obj, tl_dl_tensor *out)

    ctypedef struct tl_dl_exchange_api:
        tl_dl_api_header header
        tl_dl_tensor_from_py_fn dltensor_from_py_object_no_sync

    ctypedef struct tl_param:
        int is_tensor
        int is_output
        int caller_index
        PyObject *name
        char dtype_name[40]
        unsigned char code
        unsigned char bits
        unsigned short lanes
        int ndim
        int dim_kind[16]
        long long dim_val[16]
        int dim_defer[16]
        int strides_mode
        int stride_kind[16]
        long long stride_val[16]
        int stride_defer[16]
        int scalar_kind
        int scalar_bits
        int scalar_signed
        int symbol
        int is_written
        long long index_limit
        long long elem_bytes

    ctypedef struct tl_deferred:
        int param
        int dim
        int is_stride
        int expr

    ctypedef struct tl_kernel:
        PyObject *name
        PyObject *meta
        PyObject *api_owner
        const tl_dl_exchange_api *api
        tl_dl_tensor_from_py_fn fast_read
        void *tensor_type
        int device_type
        int n_params, n_inputs, n_outputs, n_syms, n_exprs, n_deferred
        tl_param *params
        int *input_params
        int *output_params
        int *written_inputs
        int n_written_inputs
        PyObject **sym_names
        PyObject **sym_dtypes
        long long *sym_high
        PyObject *arg_names
        long long *expr_code
        int *expr_start
        PyObject **expr_text
        tl_deferred *deferred
        long long gil_release_elems

    int tl_kernel_type_ready() except -1
    tl_kernel *tl_kernel_alloc(int n_params, int n_syms, int n_exprs, int code_len) except NULL
    int tl_kernel_open_library(tl_kernel *k, const char *path, const char *entry, const char *errstr,
                               const char *launcher, const char *assert_message) except -1
    const tl_dl_exchange_api *tl_api_from_capsule(object capsule) except NULL
    object tl_describe_read(tl_dl_tensor_from_py_fn fn, object obj)
    PyObject *tl_num_threads_fn
    int tl_pool_threads()
    long long tl_pool_stat_parallel, tl_pool_stat_unpaid, tl_pool_stat_serial

tl_kernel_type_ready()

#: Plan layout this extension understands (see plan.py).
PLAN_FORMAT = 1

cdef dict _KIND = {"static": 0, "sym": 1, "expr": 2}
cdef dict _SCALAR = {"int": 0, "float": 1, "bool": 2}


cdef inline PyObject *_newref(object o):
    Py_INCREF(o)
    return <PyObject *>o


def dlpack_api_version():
    """(major, minor) of torch's ``__dlpack_c_exchange_api__`` table (imports torch)."""
    import torch

    cap = torch.Tensor.__dlpack_c_exchange_api__
    cdef const tl_dl_exchange_api *api = tl_api_from_capsule(cap)
    return (api.header.version.major, api.header.version.minor)


# ------------------------------------------------------------------------------------------
# the tensor reader: _torch_reader (torch's C++ API, optional) in front of DLPack

cdef tl_dl_tensor_from_py_fn _fast_reader = NULL
cdef object _reader_state = None  # None until chosen, then "torch" or "dlpack: <why>"
cdef object _cuda_state = None  # the same for CUDA kernels, once checked on CUDA tensors


def _probe_tensors(torch):
    """Tensors on which the fast reader must read exactly what DLPack reads (CPU; every dtype it
    handles, views with offsets, odd strides, size-1 and 0-size dimensions, 0-d, lazy views)."""
    import warnings

    dtypes = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16",
              "bfloat16", "float32", "float64", "complex32", "complex64", "complex128"]
    probes = []
    for name in dtypes:
        dtype = getattr(torch, name, None)
        if dtype is not None:
            try:
                with warnings.catch_warnings():  # "ComplexHalf support is experimental"
                    warnings.simplefilter("ignore")
                    probes.append((name, torch.zeros((2, 3), dtype=dtype)))
            except (RuntimeError, TypeError):
                pass
    base = torch.arange(60, dtype=torch.float32)
    probes += [
        ("transposed", base.view(3, 4, 5).transpose(0, 2)),
        ("offset view", base.view(6, 10)[1:, 2::3]),
        ("size-1 dimension with a large stride", base.as_strided((2, 1, 3), (3, 50, 1), 4)),
        ("broadcast (stride 0)", base[:5].expand(4, 5)),
        ("0-size", torch.zeros((0, 3))),
        ("0-size view past the end", base[70:]),
        ("0-d", torch.tensor(1.5)),
        ("conjugate view", torch.zeros(3, dtype=torch.complex64).conj()),
        ("negative view", torch.zeros(3, dtype=torch.complex64).conj().imag),
        ("parameter", torch.nn.Parameter(torch.zeros(3))),
        ("requires_grad", torch.zeros(3, requires_grad=True)),
        ("non-leaf", torch.zeros(3, requires_grad=True) * 2),
        ("subclass", torch.zeros(3).as_subclass(type("_Sub", (torch.Tensor,), {}))),
        ("meta", torch.zeros(3, device="meta")),  # DLPack refuses these two: so must the fast reader
        ("sparse", torch.zeros(3).to_sparse()),
    ]
    with torch.inference_mode():
        probes.append(("inference", torch.zeros(3)))
    return probes


cdef object _mismatch(tl_dl_tensor_from_py_fn fast, const tl_dl_exchange_api *api, list probes):
    """The label of the first probe the two readers read differently (None: they agree; a probe the
    fast reader declines is DLPack's)."""
    for label, t in probes:
        mine = tl_describe_read(fast, t)
        if mine is not None and mine != tl_describe_read(api.dltensor_from_py_object_no_sync, t):
            return label
    return None


cdef object _choose_reader(object torch, const tl_dl_exchange_api *api):
    """Loads _torch_reader, checks it against DLPack on CPU probes, and sets _fast_reader; returns the state."""
    global _fast_reader
    try:
        from tilelang_backend_cython import _torch_reader
    except ImportError as exc:
        return (f"dlpack: the optional _torch_reader module is not usable ({exc}); it is built at install "
                f"time when torch is importable there")
    if _torch_reader.TORCH_VERSION != torch.__version__:
        return (f"dlpack: _torch_reader was built for torch {_torch_reader.TORCH_VERSION}, "
                f"this is torch {torch.__version__}; reinstall the plugin")
    if api.dltensor_from_py_object_no_sync == NULL:
        return "dlpack: torch's DLPack API has no dltensor_from_py_object_no_sync to check _torch_reader against"
    _torch_reader.set_cuda_device_type(10 if getattr(torch.version, "hip", None) else TL_DL_CUDA)
    cdef tl_dl_tensor_from_py_fn fast = <tl_dl_tensor_from_py_fn>PyCapsule_GetPointer(
        _torch_reader.reader, "tilelang_backend_cython.tensor_reader")
    try:
        probes = _probe_tensors(torch)
    except Exception as exc:  # noqa: BLE001 - an unusual torch build: stay with DLPack
        return f"dlpack: the probe tensors for checking _torch_reader cannot be made ({type(exc).__name__}: {exc})"
    label = _mismatch(fast, api, probes)
    if label is not None:
        return f"dlpack: _torch_reader reads a {label} tensor differently from DLPack"
    _fast_reader = fast
    return "torch"


cdef object _check_cuda(object torch, const tl_dl_exchange_api *api):
    """The state for CUDA kernels: the CPU state, confirmed once on CUDA tensors when a GPU is there."""
    if not torch.cuda.is_available():  # no CUDA tensor can reach the reader
        return "torch"
    try:
        base = torch.arange(24, dtype=torch.float32, device="cuda")
    except Exception as exc:  # noqa: BLE001 - no usable GPU after all: stay with DLPack
        return f"dlpack: the CUDA probe tensors for checking _torch_reader cannot be made ({type(exc).__name__}: {exc})"
    label = _mismatch(_fast_reader, api, [("CUDA", base.view(4, 6)), ("CUDA view", base.view(4, 6)[1:, ::2]),
                                          ("0-size CUDA", base[30:])])
    return "torch" if label is None else f"dlpack: _torch_reader reads a {label} tensor differently from DLPack"


def tensor_reader(device="cpu"):
    """How kernels made for ``device`` ("cpu" or "cuda") with ``reader="auto"`` read their tensor
    arguments: ``"torch"`` (the optional ``_torch_reader``, torch's C++ API, DLPack for the tensors it
    leaves) or ``"dlpack: <why not torch>"``. Imports torch; the first call compares the two readers
    on probe tensors (for "cuda", on the GPU when there is one)."""
    import torch

    global _reader_state, _cuda_state
    cdef const tl_dl_exchange_api *api = tl_api_from_capsule(torch.Tensor.__dlpack_c_exchange_api__)
    if _reader_state is None:
        _reader_state = _choose_reader(torch, api)
    if device != "cuda" or _fast_reader == NULL:
        return _reader_state
    if _cuda_state is None:
        _cuda_state = _check_cuda(torch, api)
    return _cuda_state


def pool_threads():
    """Worker threads the block launcher has started in this process (0 until a kernel needed them)."""
    return tl_pool_threads()


def pool_stats():
    """Block launcher runs so far: ``{"parallel": n, "unpaid": n, "serial": n}`` (parallel runs, those of
    them that gained less than 10% over their CPU time, runs done serially)."""
    return {"parallel": tl_pool_stat_parallel, "unpaid": tl_pool_stat_unpaid, "serial": tl_pool_stat_serial}


def make_kernel(dict plan, str library, dict meta, str reader="auto"):
    """Build a callable ``CythonKernel`` from a call plan and a compiled kernel library.

    :param plan: the call plan (``tilelang_backend_cython.plan.make_plan``), JSON-compatible.
    :param library: path of the shared library exporting ``plan['entry']``.
    :param meta: stored on the kernel as ``kernel.meta`` (the save hook reads it).
    :param reader: ``"auto"``: tensors are read through ``_torch_reader`` where :func:`tensor_reader`
        says ``"torch"``, else through DLPack; ``"dlpack"``: through DLPack only.
    :raises ValueError: the plan is malformed or exceeds the dispatcher's limits, or ``reader`` is
        neither of the two.
    :raises OSError: the library cannot be loaded or lacks the entry symbol.
    """
    import torch

    if reader not in ("auto", "dlpack"):
        raise ValueError(f"make_kernel(reader=...): expected 'auto' or 'dlpack', got {reader!r}")
    global tl_num_threads_fn
    if tl_num_threads_fn == NULL:
        tl_num_threads_fn = _newref(torch.get_num_threads)
    if plan.get("format") != PLAN_FORMAT:
        raise ValueError(f"call plan format {plan.get('format')!r} is not supported (expects {PLAN_FORMAT})")
    params = plan["params"]
    symbols = plan["symbols"]
    exprs = plan["exprs"]
    code_len = sum(len(e["code"]) for e in exprs)
    cdef tl_kernel *k = tl_kernel_alloc(len(params), len(symbols), len(exprs), code_len)
    kernel = <object><PyObject *>k
    # tl_kernel_alloc returned a new reference; `kernel` took another one
    Py_DECREF(kernel)

    k.name = _newref(str(plan["name"]))
    k.meta = _newref(meta)
    capsule = torch.Tensor.__dlpack_c_exchange_api__
    k.api = tl_api_from_capsule(capsule)
    k.api_owner = _newref(capsule)
    k.tensor_type = <void *>_newref(torch.Tensor)
    device = plan["device"]
    if device == "cpu":
        k.device_type = TL_DL_CPU
    elif device == "cuda":
        k.device_type = TL_DL_CUDA
    else:
        raise ValueError(f"call plan device {device!r} is not supported (cpu, cuda)")
    k.fast_read = _fast_reader if reader == "auto" and tensor_reader(device) == "torch" else NULL
    release = plan.get("gil_release_elems")
    k.gil_release_elems = -1 if release is None else int(release)

    cdef int i, d, n_in = 0, n_out = 0, n_def = 0, pos = 0
    cdef tl_param *p
    names = []
    sym_dtypes = plan.get("symbol_dtypes") or ["int64"] * len(symbols)
    for i, sym in enumerate(symbols):
        k.sym_names[i] = _newref(str(sym))
        k.sym_dtypes[i] = _newref(str(sym_dtypes[i]))
        high = symbol_high(sym_dtypes[i])  # a size or stride over it would be narrowed: refused
        k.sym_high[i] = LLONG_MAX if high is None else high
    for i, e in enumerate(exprs):
        k.expr_text[i] = _newref(str(e["text"]))
        k.expr_start[i] = pos
        for op in e["code"]:
            k.expr_code[pos] = op
            pos += 1
    for i, prm in enumerate(params):
        p = &k.params[i]
        p.name = _newref(str(prm["name"]))
        dtype_b = str(prm["dtype"]).encode()[:39]
        strncpy(p.dtype_name, dtype_b, 39)
        p.symbol = -1
        if prm["kind"] == "tensor":
            p.is_tensor = 1
            p.is_written = 1 if prm.get("written", True) else 0
            p.index_limit = -1 if prm.get("index_limit") is None else int(prm["index_limit"])
            p.code, p.bits, p.lanes = prm["dl"]
            p.elem_bytes = (p.bits * p.lanes + 7) // 8
            dims = prm["dims"]
            if len(dims) > TL_MAX_NDIM:
                raise ValueError(f"parameter {prm['name']!r} has {len(dims)} dimensions; at most {TL_MAX_NDIM}")
            p.ndim = len(dims)
            for d, (kind, val) in enumerate(dims):
                p.dim_kind[d] = _KIND[kind]
                p.dim_val[d] = val
                if kind == "expr" and not prm["output"]:
                    if n_def >= TL_MAX_PARAMS:
                        raise ValueError("too many expression-valued dimensions for the cython dispatcher")
                    p.dim_defer[d] = n_def
                    k.deferred[n_def].param = i
                    k.deferred[n_def].dim = d
                    k.deferred[n_def].is_stride = 0
                    k.deferred[n_def].expr = val
                    n_def += 1
            strides = prm.get("strides")
            if strides is None:
                p.strides_mode = 0
            else:
                # every stride is compared after the symbols are bound (one deferred slot each)
                p.strides_mode = 1
                for d, (kind, val) in enumerate(strides):
                    p.stride_kind[d] = _KIND[kind]
                    p.stride_val[d] = val
                    if kind == "sym":  # binds a symbol from the tensor's stride (no deferred check)
                        if prm["output"]:
                            raise ValueError("an output's stride cannot bind a symbol")
                        p.stride_defer[d] = -1
                        continue
                    if not prm["output"]:
                        if n_def >= TL_MAX_PARAMS:
                            raise ValueError("too many expression-valued strides for the cython dispatcher")
                        p.stride_defer[d] = n_def
                        k.deferred[n_def].param = i
                        k.deferred[n_def].dim = d
                        k.deferred[n_def].is_stride = 1
                        k.deferred[n_def].expr = val if kind == "expr" else -1
                        n_def += 1
        else:
            p.is_tensor = 0
            p.scalar_kind = _SCALAR[prm["scalar_kind"]]
            p.scalar_bits = prm["bits"]
            p.scalar_signed = 1 if prm["signed"] else 0
            p.symbol = prm["symbol"]
        if prm["output"]:
            p.is_output = 1
            p.caller_index = -1
            k.output_params[n_out] = i
            n_out += 1
        else:
            p.caller_index = n_in
            k.input_params[n_in] = i
            if p.is_tensor and p.is_written:
                k.written_inputs[k.n_written_inputs] = n_in
                k.n_written_inputs += 1
            n_in += 1
            names.append(str(prm["name"]))
    k.n_inputs = n_in
    k.n_outputs = n_out
    k.n_deferred = n_def
    k.arg_names = _newref(", ".join(names))
    # os.fsencode: a path as the file system names it (UTF-8 encoding refused a non-ASCII path,
    # surrogate-escaped under a non-UTF-8 locale, and the backend was reported broken)
    tl_kernel_open_library(k, os.fsencode(library), str(plan["entry"]).encode(),
                           str(plan.get("error_string") or "").encode(),
                           str(plan.get("block_launcher") or "").encode(),
                           str(plan.get("assert_message") or "").encode())
    return kernel
