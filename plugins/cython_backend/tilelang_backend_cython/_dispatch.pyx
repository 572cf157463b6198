# cython: language_level=3, boundscheck=False, wraparound=False
"""Native dispatcher of the cython backend (compiled once, when the plugin is installed).

:func:`make_kernel` turns a call plan (a JSON-compatible dict made by
:mod:`tilelang_backend_cython.plan`) plus a compiled kernel library into a ``CythonKernel``: a
callable whose call path (vectorcall, DLPack C exchange API, validation in C) is in
``_dispatch_core.h``. This module only fills the plan's C structures; it never runs per call.
"""

from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF
from libc.limits cimport LLONG_MAX
from libc.string cimport strncpy

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

    ctypedef struct tl_dl_exchange_api:
        tl_dl_api_header header

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


def pool_threads():
    """Worker threads the block launcher has started in this process (0 until a kernel needed them)."""
    return tl_pool_threads()


def pool_stats():
    """Block launcher runs so far: ``{"parallel": n, "unpaid": n, "serial": n}`` (parallel runs, those of
    them that gained less than 10% over their CPU time, runs done serially)."""
    return {"parallel": tl_pool_stat_parallel, "unpaid": tl_pool_stat_unpaid, "serial": tl_pool_stat_serial}


def make_kernel(dict plan, str library, dict meta):
    """Build a callable ``CythonKernel`` from a call plan and a compiled kernel library.

    :param plan: the call plan (``tilelang_backend_cython.plan.make_plan``), JSON-compatible.
    :param library: path of the shared library exporting ``plan['entry']``.
    :param meta: stored on the kernel as ``kernel.meta`` (the save hook reads it).
    :raises ValueError: the plan is malformed or exceeds the dispatcher's limits.
    :raises OSError: the library cannot be loaded or lacks the entry symbol.
    """
    import torch

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
    tl_kernel_open_library(k, library.encode(), str(plan["entry"]).encode(),
                           str(plan.get("error_string") or "").encode(),
                           str(plan.get("block_launcher") or "").encode(),
                           str(plan.get("assert_message") or "").encode())
    return kernel
