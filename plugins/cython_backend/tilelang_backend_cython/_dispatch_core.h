/*
 * The hot path of the cython backend: a kernel object whose call goes through vectorcall,
 * reads every tensor through torch's DLPack C exchange API, validates it against the call plan,
 * binds the dynamic symbols, allocates the outputs through the same API and calls the kernel's
 * uniform entry point (generated at build time, see tilelang_backend_cython/codegen.py).
 *
 * Nothing here touches torch's Python attributes (t.dtype, t.shape, ...): that is what keeps a
 * call in the sub-microsecond range. Where the optional _torch_reader module is built (see
 * _torch_reader.cpp), it reads the plain tensors instead of DLPack, about 7 ns a tensor instead
 * of 50; DLPack reads the others. The plan itself is filled in by _dispatch.pyx.
 */
#ifndef TL_CY_DISPATCH_CORE_H
#define TL_CY_DISPATCH_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_tl_dlpack.h"
#include "_pool.h"

#define TL_MAX_NDIM 16
#define TL_MAX_PARAMS 256
#define TL_MAX_SYMS 64
#define TL_MAX_STACK 32

/* one value handed to the generated entry: a data pointer, an integer or a float */
typedef union {
  void *p;
  long long i;
  double f;
} tl_value;

typedef int (*tl_entry_fn)(tl_value *values, const long long *symbols, void *stream, int device);
typedef const char *(*tl_errstr_fn)(int code);
typedef const char *(*tl_assert_message_fn)(int32_t status);
#define TL_DEVICE_ASSERT_FAILED (-3) /* this status and those below: a T.device_assert failed (lowering/device_assert.py) */

enum { TL_DIM_STATIC = 0, TL_DIM_SYM = 1, TL_DIM_EXPR = 2 };
enum { TL_STRIDES_COMPACT = 0, TL_STRIDES_EXPLICIT = 1 };
enum { TL_SCALAR_INT = 0, TL_SCALAR_FLOAT = 1, TL_SCALAR_BOOL = 2 };
enum {
  TL_OP_END = 0,
  TL_OP_CONST = 1,
  TL_OP_SYM = 2,
  TL_OP_ADD = 3,
  TL_OP_SUB = 4,
  TL_OP_MUL = 5,
  TL_OP_FLOORDIV = 6,
  TL_OP_MOD = 7,
  TL_OP_NEG = 8,
  TL_OP_MIN = 9,
  TL_OP_MAX = 10
};

typedef struct {
  int is_tensor;
  int is_output;     /* allocated by the kernel object (out_idx) */
  int caller_index;  /* position among the caller's arguments; -1 for outputs */
  PyObject *name;    /* str */
  char dtype_name[40];
  uint8_t code, bits;
  uint16_t lanes;
  int ndim;
  int dim_kind[TL_MAX_NDIM];
  long long dim_val[TL_MAX_NDIM]; /* static size, symbol index or expression index */
  int dim_defer[TL_MAX_NDIM];     /* slot in the deferred-check table for TL_DIM_EXPR */
  int strides_mode;
  int stride_kind[TL_MAX_NDIM];
  long long stride_val[TL_MAX_NDIM];
  int stride_defer[TL_MAX_NDIM];
  /* scalars */
  int scalar_kind;
  int scalar_bits;
  int scalar_signed;
  int symbol; /* symbol index a scalar parameter binds, -1 if none */
  int is_written; /* the kernel may store into this tensor (artifact TensorParam.written) */
  long long index_limit; /* most elements (largest offset + 1) its 32-bit indices address; -1: none */
  long long elem_bytes;  /* bytes of one element (overlap check) */
} tl_param;

/* an expression-valued dimension/stride checked after every symbol is bound */
typedef struct {
  int param;
  int dim;
  int is_stride;
  int expr;
} tl_deferred;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *name;      /* str: artifact.name */
  PyObject *meta;      /* dict: plan, paths (used by the save hook) */
  PyObject *api_owner; /* the capsule keeping the API table alive */
  const tl_dl_exchange_api *api;
  tl_dl_tensor_from_py_fn fast_read; /* _torch_reader's tl_torch_read (0: read, else ask DLPack), or NULL */
  PyTypeObject *tensor_type;
  int device_type; /* TL_DL_CPU or TL_DL_CUDA */
  int n_params, n_inputs, n_outputs, n_syms, n_exprs, n_deferred;
  tl_param *params;
  int *input_params;  /* caller index -> param index */
  int *output_params; /* output k -> param index */
  int *written_inputs; /* caller indices of the written tensor inputs */
  int n_written_inputs;
  PyObject **sym_names;
  PyObject **sym_dtypes; /* str per symbol: its dtype, named when a value does not fit */
  long long *sym_high;   /* per symbol: the largest size or stride it holds (LLONG_MAX: any) */
  PyObject *arg_names; /* "a, b" for the wrong-count message */
  long long *expr_code;
  int *expr_start;
  PyObject **expr_text;
  tl_deferred *deferred;
  long long gil_release_elems; /* release the GIL when the inputs hold at least this many */
  int parallel;                /* the library's block launcher is ours: it releases the GIL itself */
  void *lib;
  tl_entry_fn entry;
  tl_errstr_fn errstr;
  tl_assert_message_fn assert_message; /* the text of the T.device_assert of a status, or NULL */
  PyObject *weakreflist;
} tl_kernel;

/* ------------------------------------------------------------------------------------------ */
/* messages                                                                                   */

/* the type name error messages use: the part after the module, except for a type named like a
   builtin one (numpy.bool stays numpy.bool, not bool; the core's calling.type_name agrees) */
static const char *tl_short_type_name(PyObject *obj) {
  static const char *const builtin_like[] = {"bool", "int", "float", "complex", "str", "bytes", "object", "list",
                                             "tuple", "dict", "type", NULL};
  const char *n = Py_TYPE(obj)->tp_name;
  const char *dot = strrchr(n, '.');
  int i;
  if (!dot) return n;
  for (i = 0; builtin_like[i]; i++)
    if (strcmp(dot + 1, builtin_like[i]) == 0) return n;
  return dot + 1;
}

/* numpy's complex scalars, which a float scalar refuses as it refuses Python's complex (their
   __float__ drops the imaginary part with a warning); the core's calling.is_complex_number agrees */
static int tl_is_numpy_complex(PyObject *obj) {
  const char *n = Py_TYPE(obj)->tp_name;
  return strncmp(n, "numpy.complex", 13) == 0 || strcmp(n, "numpy.clongdouble") == 0;
}

/* numpy's bool scalar (numpy.bool; numpy.bool_ before numpy 2), which bool and int scalars take as
   True/False although it has no __index__; told by its type's name, without importing numpy */
static int tl_is_numpy_bool(PyObject *obj) {
  const char *n = Py_TYPE(obj)->tp_name;
  return strcmp(n, "numpy.bool") == 0 || strcmp(n, "numpy.bool_") == 0;
}

static void tl_dtype_name(uint8_t code, uint8_t bits, uint16_t lanes, char *buf, size_t size) {
  const char *base = NULL;
  char tmp[32];
  switch (code) {
    case 0: snprintf(tmp, sizeof tmp, "int%d", bits); base = tmp; break;
    case 1: snprintf(tmp, sizeof tmp, "uint%d", bits); base = tmp; break;
    case 2: snprintf(tmp, sizeof tmp, "float%d", bits); base = tmp; break;
    case 3: base = "handle"; break;
    case 4: snprintf(tmp, sizeof tmp, "bfloat%d", bits); base = tmp; break;
    case 5: snprintf(tmp, sizeof tmp, "complex%d", bits); base = tmp; break;
    case 6: base = "bool"; break;
    case 7: base = "float8_e3m4"; break;
    case 8: base = "float8_e4m3"; break;
    case 9: base = "float8_e4m3b11fnuz"; break;
    case 10: base = "float8_e4m3fn"; break;
    case 11: base = "float8_e4m3fnuz"; break;
    case 12: base = "float8_e5m2"; break;
    case 13: base = "float8_e5m2fnuz"; break;
    case 14: base = "float8_e8m0fnu"; break;
    case 15: base = "float6_e2m3fn"; break;
    case 16: base = "float6_e3m2fn"; break;
    case 17: base = "float4_e2m1fn"; break;
    default: snprintf(tmp, sizeof tmp, "dlpack(code=%d, bits=%d)", code, bits); base = tmp; break;
  }
  if (lanes > 1)
    snprintf(buf, size, "%sx%d", base, lanes);
  else
    snprintf(buf, size, "%s", base);
}

static void tl_device_name(const tl_dl_device *d, char *buf, size_t size) {
  switch (d->device_type) {
    case TL_DL_CPU: snprintf(buf, size, "cpu"); break;
    case TL_DL_CUDA: snprintf(buf, size, "cuda:%d", d->device_id); break;
    case TL_DL_ROCM: snprintf(buf, size, "cuda:%d (rocm)", d->device_id); break;
    case TL_DL_METAL: snprintf(buf, size, "mps:%d", d->device_id); break;
    case TL_DL_CUDA_HOST: snprintf(buf, size, "cpu (pinned)"); break;
    case TL_DL_CUDA_MANAGED: snprintf(buf, size, "cuda:%d (managed)", d->device_id); break;
    default: snprintf(buf, size, "DLPack device type %d:%d", d->device_type, d->device_id); break;
  }
}

static void tl_format_tuple(const int64_t *v, int n, char *buf, size_t size) {
  size_t used = 0;
  int i;
  used += (size_t)snprintf(buf + used, size - used, "(");
  for (i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)v[i]);
  if (used < size) snprintf(buf + used, size - used, n == 1 ? ",)" : ")");
}

/* whether two elements of a tensor may share memory (tilelang_core.calling.elements_overlap):
   size-1 dimensions are ignored, an empty tensor overlaps nothing, a dimension of size > 1 with
   stride 0 overlaps; the others, sorted by |stride|, must each have a stride of at least the
   previous stride times the previous size. Sufficient for no overlap, not necessary: an exotic
   interleaving (strides (3, 2) for shape (2, 3)) is called overlapping too. */
static int tl_elements_overlap(const int64_t *shape, const int64_t *strides, int ndim) {
  long long st[TL_MAX_NDIM], sz[TL_MAX_NDIM], reach;
  int d, m = 0, i, j;
  for (d = 0; d < ndim; d++) {
    if (shape[d] == 0) return 0;
    if (shape[d] == 1) continue;
    if (strides[d] == 0) return 1;
    /* insertion sort by |stride| */
    for (i = m; i > 0 && st[i - 1] > (strides[d] < 0 ? -strides[d] : strides[d]); i--) {
      st[i] = st[i - 1];
      sz[i] = sz[i - 1];
    }
    st[i] = strides[d] < 0 ? -strides[d] : strides[d];
    sz[i] = shape[d];
    m++;
  }
  if (m < 2) return 0;
  reach = st[0] * sz[0];
  for (j = 1; j < m; j++) {
    if (st[j] < reach) return 1;
    reach = st[j] * sz[j];
  }
  return 0;
}

/* "<kernel>() argument '<param>' (#i): <what>" */
static PyObject *tl_arg_error(tl_kernel *k, PyObject *exc, const tl_param *p, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  PyErr_Format(exc, "%U() argument '%U' (#%d): %s", k->name, p->name, p->caller_index, what);
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* expressions                                                                                */

static long long tl_floordiv(long long a, long long b) {
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}

static long long tl_floormod(long long a, long long b) {
  long long r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* evaluates expression `e`; returns 0, or -1 with a Python error set */
static int tl_eval(tl_kernel *k, int e, const long long *syms, long long *out) {
  long long stack[TL_MAX_STACK];
  int sp = 0;
  const long long *pc = k->expr_code + k->expr_start[e];
  for (;;) {
    long long op = *pc++;
    long long a, b;
    switch (op) {
      case TL_OP_END:
        *out = stack[sp - 1];
        return 0;
      case TL_OP_CONST: stack[sp++] = *pc++; break;
      case TL_OP_SYM: stack[sp++] = syms[*pc++]; break;
      case TL_OP_NEG: stack[sp - 1] = -stack[sp - 1]; break;
      default:
        b = stack[--sp];
        a = stack[sp - 1];
        switch (op) {
          case TL_OP_ADD: a = a + b; break;
          case TL_OP_SUB: a = a - b; break;
          case TL_OP_MUL: a = a * b; break;
          case TL_OP_FLOORDIV:
          case TL_OP_MOD:
            if (b == 0) {
              PyErr_Format(PyExc_ValueError, "%U(): expression '%U' divides by zero for these shapes",
                           k->name, k->expr_text[e]);
              return -1;
            }
            a = op == TL_OP_FLOORDIV ? tl_floordiv(a, b) : tl_floormod(a, b);
            break;
          case TL_OP_MIN: a = a < b ? a : b; break;
          case TL_OP_MAX: a = a > b ? a : b; break;
          default:
            PyErr_Format(PyExc_SystemError, "%U(): corrupt call plan (opcode %lld)", k->name, op);
            return -1;
        }
        stack[sp - 1] = a;
        break;
    }
  }
}

/* ------------------------------------------------------------------------------------------ */
/* the block launcher (see _pool.h)                                                           */

static PyObject *tl_num_threads_fn = NULL; /* torch.get_num_threads, set by _dispatch.pyx */
static int tl_last_team = 1;

/* the program's thread setting: torch.get_num_threads() (which follows torch.set_num_threads and
 * OMP_NUM_THREADS); needs the GIL */
static int tl_team_size(void) {
  PyObject *r;
  long n;
  if (!tl_num_threads_fn) return 1;
  r = PyObject_CallNoArgs(tl_num_threads_fn);
  if (!r) {
    PyErr_Clear();
    return 1;
  }
  n = PyLong_AsLong(r);
  Py_DECREF(r);
  if (n < 1) {
    PyErr_Clear();
    n = 1;
  }
  if (n > TL_POOL_MAX_THREADS) n = TL_POOL_MAX_THREADS;
  tl_last_team = (int)n;
  return (int)n;
}

/* called by a kernel (tl_run_blocks) for a block loop whose work reached TL_PARALLEL_MIN_WORK;
 * the dispatcher calls such kernels with the GIL held, and the GIL is released while blocks run */
static int32_t tl_block_launcher(int64_t blocks, int64_t work, tl_blocks_fn fn, void *args) {
  PyThreadState *ts = NULL;
  int team;
  int32_t rc;
  (void)work;
  if (PyGILState_Check()) {
    team = tl_team_size();
    ts = PyEval_SaveThread();
  } else {
    team = tl_last_team;
  }
  rc = tl_pool_run(team, blocks, fn, args);
  if (ts) PyEval_RestoreThread(ts);
  return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* errors reported by the producer's allocator                                                */

static void tl_set_error(void *ctx, const char *kind, const char *message) {
  PyObject *exc = PyExc_RuntimeError;
  (void)ctx;
  if (kind && strcmp(kind, "MemoryError") == 0) exc = PyExc_MemoryError;
  else if (kind && strcmp(kind, "ValueError") == 0) exc = PyExc_ValueError;
  else if (kind && strcmp(kind, "TypeError") == 0) exc = PyExc_TypeError;
  PyErr_Format(exc, "%s", message ? message : "allocation failed");
}

/* ------------------------------------------------------------------------------------------ */
/* argument checks                                                                            */

static PyObject *tl_clash(tl_kernel *k, const tl_param *p, const char *where, int sym, long long value,
                          const long long *syms, const int *src) {
  const tl_param *other = &k->params[src[sym]];
  PyErr_Format(PyExc_ValueError,
               "%U() argument '%U' (#%d): %s binds symbol '%U' = %lld, but argument '%U' bound it to %lld",
               k->name, p->name, p->caller_index, where, k->sym_names[sym], value, other->name,
               syms[sym]);
  return NULL;
}

#if defined(__GNUC__)
#define TL_INLINE static inline __attribute__((always_inline))
#define TL_LIKELY(x) __builtin_expect(!!(x), 1)
#define TL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define TL_INLINE static inline
#define TL_LIKELY(x) (x)
#define TL_UNLIKELY(x) (x)
#endif

static PyObject *tl_storage_error(tl_kernel *k, const tl_param *p, PyObject *obj);

static int tl_check_lazy_views(tl_kernel *k, const tl_param *p, PyObject *obj) {
  static const char *const methods[2] = {"is_conj", "is_neg"};
  static const char *const fixes[2] = {"a lazy conjugate view; call .resolve_conj()",
                                       "a lazy negative view; call .resolve_neg()"};
  int i;
  for (i = 0; i < 2; i++) {
    PyObject *r = PyObject_CallMethod(obj, methods[i], NULL);
    int set;
    if (!r) return -1;
    set = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (set < 0) return -1;
    if (set) {
      tl_arg_error(k, PyExc_ValueError, p, "expected a tensor with its data materialized, got %s", fixes[i]);
      return -1;
    }
  }
  return 0;
}

/* "'m' = 32769, 'n + 1' = 8": the sizes of a tensor's dynamic dimensions, for messages */
static void tl_dynamic_dims(tl_kernel *k, const tl_param *p, const int64_t *shape, char *buf, size_t size) {
  size_t used = 0;
  int d;
  buf[0] = 0;
  for (d = 0; d < p->ndim && used < size; d++) {
    PyObject *label;
    if (p->dim_kind[d] == TL_DIM_STATIC) continue;
    label = p->dim_kind[d] == TL_DIM_SYM ? k->sym_names[p->dim_val[d]] : k->expr_text[p->dim_val[d]];
    used += (size_t)snprintf(buf + used, size - used, "%s'%s' = %lld", used ? ", " : "", PyUnicode_AsUTF8(label),
                             (long long)shape[d]);
  }
}

/* declared: a parameter with declared strides, whose message names its strides (NULL strides: compact
   ones); the words are tilelang_core.calling.index_reach_text's */
static int tl_index_limit_error(tl_kernel *k, const tl_param *p, const int64_t *shape, int declared,
                                const int64_t *strides, long long elems) {
  char dims[256];
  tl_dynamic_dims(k, p, shape, dims, sizeof dims);
  if (declared && !p->is_output) {
    size_t used = strlen(dims);
    int d;
    long long compact[TL_MAX_NDIM], step = 1;
    for (d = p->ndim - 1; d >= 0; d--) {
      compact[d] = step;
      step *= shape[d];
    }
    used += (size_t)snprintf(dims + used, sizeof dims - used, "%sstrides (", used ? ", " : "");
    for (d = 0; d < p->ndim && used < sizeof dims; d++)
      used += (size_t)snprintf(dims + used, sizeof dims - used, d == 0 ? "%lld" : ", %lld",
                               strides ? (long long)strides[d] : compact[d]);
    if (used < sizeof dims) snprintf(dims + used, sizeof dims - used, p->ndim == 1 ? ",)" : ")");
    tl_arg_error(k, PyExc_ValueError, p,
                 "%lld elements from its first to its last in memory (%s) exceed this kernel's 32-bit index limit "
                 "of %lld; compile it with pass_configs={'tl.config_index_bitwidth': 64}",
                 elems, dims, p->index_limit);
    return -1;
  }
  if (p->is_output)
    PyErr_Format(PyExc_ValueError,
                 "%U(): output '%U' would have %lld elements (%s), over this kernel's 32-bit index limit of %lld; "
                 "compile it with pass_configs={'tl.config_index_bitwidth': 64}",
                 k->name, p->name, elems, dims, p->index_limit);
  else
    tl_arg_error(k, PyExc_ValueError, p,
                 "%lld elements (%s) exceed this kernel's 32-bit index limit of %lld; "
                 "compile it with pass_configs={'tl.config_index_bitwidth': 64}",
                 elems, dims, p->index_limit);
  return -1;
}

/* a size or stride over what its symbol's dtype holds (int32): refused, never narrowed. The text is
   tilelang_core.calling.symbol_range_message's; tests/test_symbol_dtype_range.py checks they stay equal */
static int tl_narrow_error(tl_kernel *k, const tl_param *p, const char *what, int d, int s, long long value) {
  tl_arg_error(k, PyExc_ValueError, p, "%s[%d] = %lld binds symbol '%s', which is %s (at most %lld); "
               "declare it T.dynamic('%s', 'int64')", what, d, value, PyUnicode_AsUTF8(k->sym_names[s]),
               PyUnicode_AsUTF8(k->sym_dtypes[s]), k->sym_high[s], PyUnicode_AsUTF8(k->sym_names[s]));
  return -1;
}

/* symbol s = value, read from the tensor's <what>[d]: bound by the first argument, the same later */
TL_INLINE int tl_bind(tl_kernel *k, const tl_param *p, const char *what, int d, int s, long long value,
                      long long *syms, int *src) {
  if (src[s] < 0) {
    syms[s] = value;
    src[s] = (int)(p - k->params);
  } else if (!TL_LIKELY(syms[s] == value)) {
    char where[32];
    snprintf(where, sizeof where, "%s[%d]", what, d);
    tl_clash(k, p, where, s, value, syms, src);
    return -1;
  }
  return 0;
}

TL_INLINE int tl_check_tensor(tl_kernel *k, const tl_param *p, PyObject *obj, const tl_dl_tensor *t, long long *syms,
                           int *src, int *dev_id, long long *deferred_vals, char *deferred_one,
                           long long *elems, long long *span) {
  int d, narrow_d = -1;
  char got[96], want[64];
  long long n = 1;
  /* dtype */
  if (!TL_LIKELY(t->dtype.code == p->code && t->dtype.bits == p->bits && t->dtype.lanes == p->lanes)) {
    tl_dtype_name(t->dtype.code, t->dtype.bits, t->dtype.lanes, got, sizeof got);
    tl_arg_error(k, PyExc_ValueError, p, "expected dtype %s, got %s", p->dtype_name, got);
    return -1;
  }
  /* ndim */
  if (!TL_LIKELY(t->ndim == p->ndim)) {
    tl_arg_error(k, PyExc_ValueError, p, "expected %d dimensions, got %d", p->ndim, t->ndim);
    return -1;
  }
  /* shape */
  for (d = 0; d < p->ndim; d++) {
    long long got_d = (long long)t->shape[d];
    n *= got_d;
    switch (p->dim_kind[d]) {
      case TL_DIM_STATIC:
        if (!TL_LIKELY(got_d == p->dim_val[d])) {
          tl_arg_error(k, PyExc_ValueError, p, "expected shape[%d] == %lld, got %lld", d, p->dim_val[d], got_d);
          return -1;
        }
        break;
      case TL_DIM_SYM:
        if (tl_bind(k, p, "shape", d, (int)p->dim_val[d], got_d, syms, src) != 0) return -1;
        if (!TL_LIKELY(got_d <= k->sym_high[p->dim_val[d]]) && narrow_d < 0) narrow_d = d;
        break;
      default:
        deferred_vals[p->dim_defer[d]] = got_d;
        break;
    }
  }
  /* 32-bit indices (dynamic shapes): the tensor's largest offset must stay in range */
  if (p->index_limit >= 0 && n > 0) {
    long long reach = n;
    if (p->strides_mode != TL_STRIDES_COMPACT && t->strides != NULL) {
      reach = 1;
      for (d = 0; d < p->ndim; d++) reach += (t->shape[d] - 1) * (t->strides[d] < 0 ? -t->strides[d] : t->strides[d]);
    }
    if (reach > p->index_limit)
      return tl_index_limit_error(k, p, t->shape, p->strides_mode != TL_STRIDES_COMPACT, t->strides, reach);
  }
  /* an int32 symbol's size (after the index limit, which names the first remedy) */
  if (narrow_d >= 0)
    return tl_narrow_error(k, p, "shape", narrow_d, (int)p->dim_val[narrow_d], (long long)t->shape[narrow_d]);
  *elems += n;
  /* device */
  if (!TL_LIKELY(t->device.device_type == k->device_type) ||
      (k->device_type != TL_DL_CPU && *dev_id >= 0 && t->device.device_id != *dev_id)) {
    tl_device_name(&t->device, got, sizeof got);
    if (k->device_type == TL_DL_CPU) snprintf(want, sizeof want, "cpu");
    else if (*dev_id >= 0) snprintf(want, sizeof want, "cuda:%d", *dev_id);
    else snprintf(want, sizeof want, "cuda");
    tl_arg_error(k, PyExc_ValueError, p, "expected a tensor on %s, got %s", want, got);
    return -1;
  }
  if (k->device_type != TL_DL_CPU && *dev_id < 0) *dev_id = t->device.device_id;
  /* lazy conjugate/negative views: DLPack cannot describe them (the data is read un-negated).
     The fast reader refuses every one (3, in the caller); this check covers tensors read through
     DLPack (no fast reader, or a tensor it leaves to DLPack). Complex tensors are checked always.
     A real tensor has the negative bit when it is .imag of a conjugate view, which has stride 2
     and so is contiguous only with at most one element: real tensors are checked for parameters
     with declared strides and for tensors of <= 1 element, and the compact-stride check below
     refuses the others (a Python call per tensor would cost the common call about half of its
     per-tensor time; only a view remade with as_strided or torch._neg_view passes there). */
  if ((p->code == 5 || p->strides_mode != TL_STRIDES_COMPACT || n <= 1) && tl_check_lazy_views(k, p, obj) != 0)
    return -1;
  /* elements but no memory: a freed storage read through DLPack (the fast reader refuses it first) */
  if (!TL_LIKELY(n == 0 || t->data != NULL)) {
    tl_storage_error(k, p, obj);
    return -1;
  }
  /* strides */
  if (TL_LIKELY(p->strides_mode == TL_STRIDES_COMPACT)) {
    long long expect = 1;
    if (n != 0 && t->strides != NULL) {
      for (d = p->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expect) {
          tl_format_tuple(t->strides, t->ndim, got, sizeof got);
          tl_arg_error(k, PyExc_ValueError, p, "expected a contiguous tensor, got strides %s; call .contiguous()",
                       got);
          return -1;
        }
        expect *= t->shape[d];
      }
    }
    *span = n * p->elem_bytes; /* bytes from the data pointer to the end of the last element */
  } else {
    /* explicit strides: a stride that binds a symbol binds it here (it comes first, as
       shapes do), the others are compared once every symbol is bound (the deferred checks) */
    long long compact = 1;
    for (d = p->ndim - 1; d >= 0; d--) {
      long long got_s = t->strides ? (long long)t->strides[d] : compact;
      if (p->stride_kind[d] == TL_DIM_SYM) {
        if (tl_bind(k, p, "stride", d, (int)p->stride_val[d], got_s, syms, src) != 0) return -1;
        if (!TL_LIKELY(got_s <= k->sym_high[p->stride_val[d]]))
          return tl_narrow_error(k, p, "stride", d, (int)p->stride_val[d], got_s);
      } else {
        int slot = p->stride_defer[d];
        deferred_vals[slot] = got_s;
        deferred_one[slot] = t->shape[d] == 1;
      }
      compact *= t->shape[d];
    }
    if (n == 0 || t->strides == NULL) {
      *span = n * p->elem_bytes;
    } else {
      long long last = 0;
      for (d = 0; d < p->ndim; d++) last += (t->shape[d] - 1) * (t->strides[d] < 0 ? -t->strides[d] : t->strides[d]);
      *span = (last + 1) * p->elem_bytes;
      /* a tensor the kernel writes: its elements must not overlap one another (compact
         parameters hold contiguous tensors, which never do) */
      if (p->is_written && n > 1 && tl_elements_overlap(t->shape, t->strides, p->ndim)) {
        char shape_s[256], strides_s[256];
        tl_format_tuple(t->strides, t->ndim, strides_s, sizeof strides_s);
        tl_format_tuple(t->shape, t->ndim, shape_s, sizeof shape_s);
        tl_arg_error(k, PyExc_ValueError, p,
                     "expected a tensor whose elements do not overlap (it is written), got strides %s for shape %s; "
                     "pass a tensor with its own memory per element (.contiguous())",
                     strides_s, shape_s);
        return -1;
      }
    }
  }
  return 0;
}

/* base.as_strided(shape, strides): an output with declared strides, over its 1-D storage */
static PyObject *tl_as_strided(PyObject *base, const int64_t *shape, const int64_t *strides, int ndim) {
  PyObject *sh = PyTuple_New(ndim), *st = PyTuple_New(ndim), *view = NULL;
  int d;
  if (sh && st) {
    for (d = 0; d < ndim; d++) {
      PyTuple_SET_ITEM(sh, d, PyLong_FromLongLong((long long)shape[d]));
      PyTuple_SET_ITEM(st, d, PyLong_FromLongLong((long long)strides[d]));
    }
    if (!PyErr_Occurred()) view = PyObject_CallMethod(base, "as_strided", "(OO)", sh, st);
  }
  Py_XDECREF(sh);
  Py_XDECREF(st);
  return view;
}

/* Whether two tensors whose byte ranges meet share no byte after all (views interleaved in one
 * storage: the column halves of a matrix, even and odd rows): tilelang_core.calling.tensors_disjoint,
 * asked only on this rare path. 1: disjoint, 0: may share, -1: an exception is set. */
static int tl_tensors_disjoint(PyObject *a, PyObject *b) {
  static PyObject *fn = NULL;
  PyObject *res;
  int out;
  if (fn == NULL) {
    PyObject *mod = PyImport_ImportModule("tilelang_core.calling");
    if (mod == NULL) return -1;
    fn = PyObject_GetAttrString(mod, "tensors_disjoint");
    Py_DECREF(mod);
    if (fn == NULL) return -1;
  }
  res = PyObject_CallFunctionObjArgs(fn, a, b, NULL);
  if (res == NULL) return -1;
  out = PyObject_IsTrue(res);
  Py_DECREF(res);
  return out;
}

/* Once some byte ranges met: "arguments 'A' (#0) and 'C' (#2) overlap in memory, ...", for the
 * first pair in caller order whose ranges meet, where the kernel writes one of the two and the
 * two views are not disjoint after all (tl_tensors_disjoint). 0: every such pair is disjoint,
 * the call goes on; -1: an exception is set. */
static int tl_overlap_check(tl_kernel *k, PyObject *const *args, const uintptr_t *lo, const uintptr_t *hi,
                            int nargs) {
  int i, j, disjoint;
  for (i = 0; i < nargs; i++) {
    const tl_param *a = &k->params[k->input_params[i]];
    for (j = i + 1; j < nargs; j++) {
      const tl_param *b = &k->params[k->input_params[j]];
      if (!(a->is_written || b->is_written)) continue;
      if (lo[i] < hi[j] && lo[j] < hi[i]) {
        disjoint = tl_tensors_disjoint(args[i], args[j]);
        if (disjoint < 0) return -1;
        if (disjoint) continue;
        PyErr_Format(PyExc_ValueError,
                     "%U() arguments '%U' (#%d) and '%U' (#%d) overlap in memory, and the kernel writes '%U'; "
                     "pass tensors that do not share memory (for example a .clone())",
                     k->name, a->name, i, b->name, j, a->is_written ? a->name : b->name);
        return -1;
      }
    }
  }
  return 0;
}

/* "expected strides (S, 1) = (1, 1), got strides (1, 4)" for an explicit-strides parameter: the
   declared strides beside their values when a symbol or expression is among them, as
   tilelang_core.calling.strides_mismatch_text words it */
static PyObject *tl_strides_error(tl_kernel *k, const tl_param *p, const long long *syms,
                                  const long long *deferred_vals) {
  int64_t want[TL_MAX_NDIM], got[TL_MAX_NDIM];
  char want_s[256], got_s[256], decl_s[512];
  size_t used = 0;
  int d, symbolic = 0;
  used += (size_t)snprintf(decl_s, sizeof decl_s, "(");
  for (d = 0; d < p->ndim; d++) {
    long long w = p->stride_val[d];
    const char *label = NULL;
    if (p->stride_kind[d] == TL_DIM_SYM) label = PyUnicode_AsUTF8(k->sym_names[p->stride_val[d]]);
    if (p->stride_kind[d] == TL_DIM_EXPR) label = PyUnicode_AsUTF8(k->expr_text[p->stride_val[d]]);
    if (p->stride_kind[d] != TL_DIM_STATIC && label == NULL) return NULL;
    symbolic |= label != NULL;
    if (used < sizeof decl_s) {
      if (label != NULL)
        used += (size_t)snprintf(decl_s + used, sizeof decl_s - used, d ? ", %s" : "%s", label);
      else
        used += (size_t)snprintf(decl_s + used, sizeof decl_s - used, d ? ", %lld" : "%lld", w);
    }
    if (p->stride_kind[d] == TL_DIM_SYM) { /* bound from this stride: it matches itself */
      want[d] = got[d] = syms[p->stride_val[d]];
      continue;
    }
    if (p->stride_kind[d] == TL_DIM_EXPR && tl_eval(k, (int)p->stride_val[d], syms, &w) != 0) return NULL;
    want[d] = w;
    got[d] = deferred_vals[p->stride_defer[d]];
  }
  if (used < sizeof decl_s) snprintf(decl_s + used, sizeof decl_s - used, p->ndim == 1 ? ",)" : ")");
  tl_format_tuple(want, p->ndim, want_s, sizeof want_s);
  tl_format_tuple(got, p->ndim, got_s, sizeof got_s);
  if (symbolic)
    return tl_arg_error(k, PyExc_ValueError, p, "expected strides %s = %s, got strides %s", decl_s, want_s, got_s);
  return tl_arg_error(k, PyExc_ValueError, p, "expected strides %s, got strides %s", want_s, got_s);
}

static int tl_read_scalar(tl_kernel *k, const tl_param *p, PyObject *obj, tl_value *v, long long *syms,
                          int *src) {
  if (p->scalar_kind == TL_SCALAR_FLOAT) {
    double x;
    if (PyFloat_CheckExact(obj)) {
      x = PyFloat_AS_DOUBLE(obj);
    } else if (PyLong_Check(obj) || PyFloat_Check(obj) ||
               (Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_float &&
                !PyObject_TypeCheck(obj, k->tensor_type) && !tl_is_numpy_complex(obj))) {
      x = PyFloat_AsDouble(obj);
      if (x == -1.0 && PyErr_Occurred()) { /* too large for a double, or no number (an array of several) */
        int range = PyErr_ExceptionMatches(PyExc_OverflowError);
        PyErr_Clear();
        if (range)
          tl_arg_error(k, PyExc_ValueError, p, "expected a float, got %s out of range", tl_short_type_name(obj));
        else
          tl_arg_error(k, PyExc_TypeError, p, "expected a float, got %s", tl_short_type_name(obj));
        return -1;
      }
    } else {
      tl_arg_error(k, PyExc_TypeError, p, "expected a float, got %s", tl_short_type_name(obj));
      return -1;
    }
    v->f = x;
    return 0;
  } else {
    long long x;
    int overflow = 0;
    const char *kind = p->scalar_kind == TL_SCALAR_BOOL ? "a bool" : "an int";
    PyObject *as_int = NULL; /* the int a uint64 value above INT64_MAX is read from */
    if (PyLong_Check(obj)) {
      x = PyLong_AsLongLongAndOverflow(obj, &overflow);
      if (x == -1 && PyErr_Occurred()) return -1;
      if (overflow > 0) as_int = obj;
    } else if (!PyFloat_Check(obj) && PyIndex_Check(obj) && !PyObject_TypeCheck(obj, k->tensor_type)) {
      PyObject *i = PyNumber_Index(obj);
      if (!i) {
        PyErr_Clear();
        tl_arg_error(k, PyExc_TypeError, p, "expected %s, got %s", kind, tl_short_type_name(obj));
        return -1;
      }
      x = PyLong_AsLongLongAndOverflow(i, &overflow);
      if (overflow > 0 && !p->scalar_signed && p->scalar_bits == 64) {
        unsigned long long u = PyLong_AsUnsignedLongLong(i);
        if (PyErr_Occurred()) PyErr_Clear(); else { x = (long long)u; overflow = -2; }
      }
      Py_DECREF(i);
      if (x == -1 && PyErr_Occurred()) return -1;
    } else if (tl_is_numpy_bool(obj)) {
      int truth = PyObject_IsTrue(obj);
      if (truth < 0) return -1;
      x = truth;
    } else {
      tl_arg_error(k, PyExc_TypeError, p, "expected %s, got %s", kind, tl_short_type_name(obj));
      return -1;
    }
    if (as_int && !p->scalar_signed && p->scalar_bits == 64) { /* uint64 up to 2**64 - 1: pass its bits */
      unsigned long long u = PyLong_AsUnsignedLongLong(as_int);
      if (PyErr_Occurred()) PyErr_Clear(); else { x = (long long)u; overflow = -2; }
    }
    if (overflow == -2) {
      overflow = 0; /* a uint64 above INT64_MAX, already range-checked */
    } else if (!overflow && p->scalar_kind == TL_SCALAR_BOOL) {
      if (x != 0 && x != 1) {
        tl_arg_error(k, PyExc_ValueError, p, "expected a bool (True/False, 0 or 1), got %lld", x);
        return -1;
      }
    } else if (!overflow && p->scalar_bits < 64) {
      long long lo, hi;
      if (p->scalar_signed) {
        hi = (1LL << (p->scalar_bits - 1)) - 1;
        lo = -hi - 1;
      } else {
        lo = 0;
        hi = (1LL << p->scalar_bits) - 1;
      }
      if (x < lo || x > hi) overflow = 1;
    } else if (!overflow && !p->scalar_signed && x < 0) {
      overflow = 1;
    }
    if (overflow) { /* the value as an int (a numpy integer's, not its repr np.int64(...)) */
      PyObject *i = PyNumber_Index(obj), *r;
      if (!i) {
        PyErr_Clear();
        Py_INCREF(obj);
        i = obj;
      }
      r = PyObject_Str(i);
      Py_DECREF(i);
      if (!r) return -1;
      if (p->scalar_kind == TL_SCALAR_BOOL)
        tl_arg_error(k, PyExc_ValueError, p, "expected a bool (True/False, 0 or 1), got %s", PyUnicode_AsUTF8(r));
      else
        tl_arg_error(k, PyExc_ValueError, p, "value %s does not fit in %s", PyUnicode_AsUTF8(r), p->dtype_name);
      Py_DECREF(r);
      return -1;
    }
    v->i = x;
    if (p->symbol >= 0) {
      int s = p->symbol;
      if (x < 0) {
        tl_arg_error(k, PyExc_ValueError, p, "gives symbol '%s' = %lld, but a dimension cannot be negative",
                     PyUnicode_AsUTF8(k->sym_names[s]), x);
        return -1;
      }
      if (src[s] < 0) {
        syms[s] = x;
        src[s] = (int)(p - k->params);
      } else if (syms[s] != x) {
        tl_clash(k, p, "value", s, x, syms, src);
        return -1;
      }
    }
    return 0;
  }
}

/* a tensor whose storage holds fewer bytes than its view reaches (or none, a NULL data pointer) */
static PyObject *tl_storage_error(tl_kernel *k, const tl_param *p, PyObject *obj) {
  long long nbytes = -1, address = -1;
  PyObject *storage = PyObject_CallMethod(obj, "untyped_storage", NULL), *size = NULL, *ptr = NULL;
  if (storage) size = PyObject_CallMethod(storage, "nbytes", NULL);
  if (size) nbytes = PyLong_AsLongLong(size);
  if (storage) {
    ptr = PyObject_CallMethod(storage, "data_ptr", NULL);
    address = ptr ? PyLong_AsLongLong(ptr) : 0; /* "invalid python storage": a wrapper subclass */
  }
  Py_XDECREF(storage);
  Py_XDECREF(size);
  Py_XDECREF(ptr);
  PyErr_Clear();
  if (nbytes > 0 && address == 0) /* bytes but no memory: a FakeTensor (tilelang_core.calling.NO_MEMORY_MESSAGE) */
    return tl_arg_error(k, PyExc_ValueError, p,
                        "expected a tensor with its data in memory, got one whose storage has no memory (a NULL data "
                        "pointer, as a FakeTensor or a wrapper subclass has); pass a real tensor (under torch.compile or "
                        "torch.export, call the kernel from a torch.library.custom_op with a fake implementation)");
  return tl_arg_error(k, PyExc_ValueError, p,
                      "expected a tensor whose storage holds its elements, got one whose storage holds %lld bytes, "
                      "fewer than its shape, strides and offset reach (a storage freed or shrunk with "
                      "untyped_storage().resize_()); pass a tensor with its data", nbytes);
}

/* torch could not describe the tensor through DLPack (meta device, sparse layout, nested, ...): say
 * why, reading the tensor's Python attributes (this path is not hot). */
static PyObject *tl_dlpack_error(tl_kernel *k, const tl_param *p, PyObject *obj) {
  PyObject *et, *ev, *tb, *msg, *layout = NULL, *device = NULL;
  const char *first = NULL, *nl;
  PyErr_Fetch(&et, &ev, &tb);
  msg = ev ? PyObject_Str(ev) : NULL;
  Py_XDECREF(et);
  Py_XDECREF(ev);
  Py_XDECREF(tb);
  PyErr_Clear();
  {
    PyObject *nested = PyObject_GetAttrString(obj, "is_nested");
    int is_nested = nested ? PyObject_IsTrue(nested) : 0;
    Py_XDECREF(nested);
    PyErr_Clear();
    if (is_nested > 0) { /* the core's calling.not_dense_message words it the same */
      tl_arg_error(k, PyExc_ValueError, p, "expected a dense (strided) tensor, got a nested tensor; "
                                           "pass its components (.unbind()) or .to_padded_tensor(0.0)");
      goto done;
    }
  }
  {
    /* a quantized tensor (torch.qint8, ...): no DLPack dtype; worded as the other paths word it */
    PyObject *quantized = PyObject_GetAttrString(obj, "is_quantized");
    int is_quantized = quantized ? PyObject_IsTrue(quantized) : 0;
    PyObject *dtype = is_quantized > 0 ? PyObject_GetAttrString(obj, "dtype") : NULL;
    PyObject *text = dtype ? PyObject_Str(dtype) : NULL;
    const char *name = text ? PyUnicode_AsUTF8(text) : NULL;
    Py_XDECREF(quantized);
    Py_XDECREF(dtype);
    PyErr_Clear();
    if (name) {
      tl_arg_error(k, PyExc_ValueError, p, "expected dtype %s, got %s", p->dtype_name,
                   strncmp(name, "torch.", 6) == 0 ? name + 6 : name);
      Py_DECREF(text);
      goto done;
    }
    Py_XDECREF(text);
  }
  layout = PyObject_GetAttrString(obj, "layout");
  if (layout) Py_SETREF(layout, PyObject_Str(layout));
  PyErr_Clear();
  if (layout && PyUnicode_CompareWithASCIIString(layout, "torch.strided") != 0) {
    tl_arg_error(k, PyExc_ValueError, p, "expected a dense (strided) tensor, got layout %s; call .to_dense()",
                 PyUnicode_AsUTF8(layout));
    goto done;
  }
  device = PyObject_GetAttrString(obj, "device");
  if (device) Py_SETREF(device, PyObject_Str(device));
  PyErr_Clear();
  if (device) {
    const char *dev = PyUnicode_AsUTF8(device);
    int ok = dev && (k->device_type == TL_DL_CPU ? strcmp(dev, "cpu") == 0 : strncmp(dev, "cuda", 4) == 0);
    if (dev && !ok) {
      tl_arg_error(k, PyExc_ValueError, p, "expected a tensor on %s, got %s",
                   k->device_type == TL_DL_CPU ? "cpu" : "cuda", dev);
      goto done;
    }
  }
  PyErr_Clear();
  {
    /* no storage at all (a vmap-batched tensor, a torch.func wrapper): worded as the core's
     * calling.storage_error words it on the other backends */
    PyObject *storage = PyObject_CallMethod(obj, "untyped_storage", NULL);
    if (storage) {
      Py_DECREF(storage);
    } else if (PyErr_ExceptionMatches(PyExc_RuntimeError) || PyErr_ExceptionMatches(PyExc_NotImplementedError)) {
      PyObject *set, *sev, *stb, *why;
      const char *text, *end;
      PyErr_Fetch(&set, &sev, &stb);
      why = sev ? PyObject_Str(sev) : NULL;
      text = why ? PyUnicode_AsUTF8(why) : NULL;
      PyErr_Clear();
      if (!text || !*text) text = "no storage";
      end = strchr(text, '\n');
      tl_arg_error(k, PyExc_ValueError, p, "expected a dense tensor with storage, got one without (%.*s); "
                   "pass a plain tensor", (int)(end ? (size_t)(end - text) : strlen(text)), text);
      Py_XDECREF(why);
      Py_XDECREF(set);
      Py_XDECREF(sev);
      Py_XDECREF(stb);
      goto done;
    }
    PyErr_Clear();
  }
  first = msg ? PyUnicode_AsUTF8(msg) : NULL;
  if (!first) {
    PyErr_Clear();
    first = "unknown error";
  }
  nl = strchr(first, '\n');
  tl_arg_error(k, PyExc_ValueError, p, "cannot read the tensor through DLPack: %.*s",
               (int)(nl ? (size_t)(nl - first) : strlen(first)), first);
done:
  Py_XDECREF(msg);
  Py_XDECREF(layout);
  Py_XDECREF(device);
  return NULL;
}

static PyObject *tl_count_error(tl_kernel *k, Py_ssize_t got) {
  PyErr_Format(PyExc_TypeError, "%U() takes %d tensor/scalar arguments (%U), got %zd", k->name, k->n_inputs,
               k->arg_names, got);
  return NULL;
}

/* the stream keyword's handle, as the core's calling.stream_handle reads it: an int (not a bool) or
   an object with an int cuda_stream, of 64 bits read signed or unsigned (PyLong_AsVoidPtr's range) */
static int tl_read_stream(tl_kernel *k, PyObject *obj, void **stream) {
  PyObject *h;
  if (obj == NULL || obj == Py_None) return 0;
  if (PyLong_Check(obj) && !PyBool_Check(obj)) {
    h = obj;
    Py_INCREF(h);
  } else {
    h = PyObject_GetAttrString(obj, "cuda_stream");
    if (!h || !PyLong_Check(h) || PyBool_Check(h)) {
      Py_XDECREF(h);
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "%U() keyword 'stream': expected an int (a cudaStream_t) or a torch.cuda.Stream, got %s",
                   k->name, tl_short_type_name(obj));
      return -1;
    }
  }
  *stream = PyLong_AsVoidPtr(h);
  if (*stream == NULL && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, "%U() keyword 'stream': expected a cudaStream_t handle of 64 bits, got %S",
                   k->name, h);
    }
    Py_DECREF(h);
    return -1;
  }
  Py_DECREF(h);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the call                                                                                   */

static PyObject *tl_kernel_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                      PyObject *kwnames) {
  tl_kernel *k = (tl_kernel *)self;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject *stream_obj = NULL;
  tl_value values[TL_MAX_PARAMS];
  long long syms[TL_MAX_SYMS];
  int src[TL_MAX_SYMS];
  long long deferred_vals[TL_MAX_PARAMS];
  char deferred_one[TL_MAX_PARAMS];
  PyObject *outs[TL_MAX_PARAMS];
  int n_outs_done = 0;
  int dev_id = -1;
  long long elems = 0;
  uintptr_t lo[TL_MAX_PARAMS]; /* per caller argument: first byte of a tensor's data, */
  uintptr_t hi[TL_MAX_PARAMS]; /* and the byte after its last element (both 0: a scalar, an empty tensor) */
  void *stream = NULL;
  int i, rc;

  if (kwnames) {
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames), j;
    for (j = 0; j < nk; j++) {
      PyObject *key = PyTuple_GET_ITEM(kwnames, j);
      if (PyUnicode_CompareWithASCIIString(key, "stream") == 0) {
        stream_obj = args[nargs + j];
      } else {
        PyErr_Format(PyExc_TypeError, "%U() got an unexpected keyword argument '%U' (only 'stream' is accepted)",
                     k->name, key);
        return NULL;
      }
    }
  }
  if (nargs != k->n_inputs) return tl_count_error(k, nargs);
  for (i = 0; i < k->n_syms; i++) src[i] = -1;

  for (i = 0; i < nargs; i++) {
    const tl_param *p = &k->params[k->input_params[i]];
    PyObject *obj = args[i];
    if (p->is_tensor) {
      tl_dl_tensor t;
      long long span;
      int read;
      if (Py_TYPE(obj) != k->tensor_type && !PyObject_TypeCheck(obj, k->tensor_type))
        return tl_arg_error(k, PyExc_TypeError, p, "expected a torch.Tensor, got %s", tl_short_type_name(obj));
      /* 0: t describes obj. The fast reader (torch's C++ API) takes the plain tensors; DLPack the
         others, and says why it cannot read one (tl_dlpack_error) */
      read = k->fast_read ? k->fast_read(obj, &t) : 1;
      if (TL_UNLIKELY(read == 2)) return tl_storage_error(k, p, obj);
      if (TL_UNLIKELY(read == 3)) {
        if (tl_check_lazy_views(k, p, obj) == 0) /* the bits were read as set: cannot pass */
          tl_arg_error(k, PyExc_ValueError, p, "expected a tensor with its data materialized, got a lazy view");
        return NULL;
      }
      if (read != 0 && k->api->dltensor_from_py_object_no_sync) {
        if (k->api->dltensor_from_py_object_no_sync(obj, &t) != 0) goto dlpack_failed;
        read = 0;
      }
      if (read == 0) {
        if (tl_check_tensor(k, p, obj, &t, syms, src, &dev_id, deferred_vals, deferred_one, &elems, &span) != 0)
          return NULL;
        values[k->input_params[i]].p = (char *)t.data + t.byte_offset;
        lo[i] = span ? (uintptr_t)values[k->input_params[i]].p : 0;
        hi[i] = lo[i] + (uintptr_t)span;
      } else {
        tl_dl_managed_versioned *m = NULL;
        if (k->api->managed_tensor_from_py_object_no_sync(obj, &m) != 0) goto dlpack_failed;
        rc = tl_check_tensor(k, p, obj, &m->dl_tensor, syms, src, &dev_id, deferred_vals, deferred_one, &elems,
                             &span);
        values[k->input_params[i]].p = (char *)m->dl_tensor.data + m->dl_tensor.byte_offset;
        lo[i] = span ? (uintptr_t)values[k->input_params[i]].p : 0;
        hi[i] = lo[i] + (uintptr_t)span;
        if (m->deleter) m->deleter(m);
        if (rc != 0) return NULL;
      }
      continue;
    dlpack_failed:
      return tl_dlpack_error(k, p, obj);
    } else {
      lo[i] = hi[i] = 0;
      if (tl_read_scalar(k, p, obj, &values[k->input_params[i]], syms, src) != 0) return NULL;
    }
  }

  /* a tensor the kernel writes must not share memory with another argument (the generated C
     also declares its pointers restrict): written inputs against every other argument */
  for (i = 0; i < k->n_written_inputs; i++) {
    int w = k->written_inputs[i], j, bad = 0;
    uintptr_t lo_w = lo[w], hi_w = hi[w];
    for (j = 0; j < w; j++) bad |= (lo_w < hi[j]) & (lo[j] < hi_w); /* no branch: vectorizes */
    for (j = w + 1; j < nargs; j++) bad |= (lo_w < hi[j]) & (lo[j] < hi_w);
    if (TL_UNLIKELY(bad)) {
      if (tl_overlap_check(k, args, lo, hi, (int)nargs) != 0) return NULL;
      break; /* ranges met, but every such pair is disjoint views: checked them all */
    }
  }

  /* dimensions given by expressions over the symbols, and explicit strides */
  for (i = 0; i < k->n_deferred; i++) {
    const tl_deferred *df = &k->deferred[i];
    const tl_param *p = &k->params[df->param];
    long long want;
    if (df->is_stride) {
      if (deferred_one[i]) continue; /* a size-1 dimension may have any stride */
      want = p->stride_val[df->dim];
      if (df->expr >= 0 && tl_eval(k, df->expr, syms, &want) != 0) return NULL;
      if (want != deferred_vals[i]) return tl_strides_error(k, p, syms, deferred_vals);
      continue;
    }
    if (tl_eval(k, df->expr, syms, &want) != 0) return NULL;
    if (want != deferred_vals[i])
      return tl_arg_error(k, PyExc_ValueError, p, "expected shape[%d] == %s = %lld, got %lld", df->dim,
                          PyUnicode_AsUTF8(k->expr_text[df->expr]), want, deferred_vals[i]);
  }

  if (k->device_type != TL_DL_CPU) {
    if (dev_id < 0) dev_id = 0;
    if (stream_obj && stream_obj != Py_None) {
      if (tl_read_stream(k, stream_obj, &stream) != 0) return NULL;
    } else if (k->api->current_work_stream((int32_t)k->device_type, dev_id, &stream) != 0) {
      return NULL;
    }
  } else if (stream_obj && stream_obj != Py_None) { /* CPU: ignored, but it must be a stream */
    void *ignored = NULL;
    if (tl_read_stream(k, stream_obj, &ignored) != 0) return NULL;
  }

  /* outputs */
  for (i = 0; i < k->n_outputs; i++) {
    const tl_param *p = &k->params[k->output_params[i]];
    int64_t shape[TL_MAX_NDIM];
    tl_dl_tensor proto;
    tl_dl_managed_versioned *m = NULL;
    PyObject *obj = NULL;
    int d;
    for (d = 0; d < p->ndim; d++) {
      long long v;
      if (p->dim_kind[d] == TL_DIM_STATIC) v = p->dim_val[d];
      else if (p->dim_kind[d] == TL_DIM_SYM) v = syms[p->dim_val[d]];
      else if (tl_eval(k, (int)p->dim_val[d], syms, &v) != 0) goto fail;
      if (v < 0) {
        PyErr_Format(PyExc_ValueError, "%U(): output '%U' would have shape[%d] == %lld for these inputs",
                     k->name, p->name, d, v);
        goto fail;
      }
      shape[d] = v;
    }
    /* declared strides: the elements from offset 0 to the largest offset, viewed with them */
    int strided = p->strides_mode != TL_STRIDES_COMPACT;
    int64_t strides[TL_MAX_NDIM];
    int64_t span[1] = {1};
    if (strided) {
      long long reach = 1;
      int over = 0, empty = 0;
      for (d = 0; d < p->ndim; d++) {
        long long v = p->stride_val[d], step;
        if (p->stride_kind[d] == TL_DIM_EXPR && tl_eval(k, (int)p->stride_val[d], syms, &v) != 0) goto fail;
        if (v < 0) {
          PyErr_Format(PyExc_ValueError, "%U(): output '%U' would have stride[%d] == %lld for these inputs",
                       k->name, p->name, d, v);
          goto fail;
        }
        strides[d] = v;
        if (shape[d] == 0) empty = 1;
        else over |= __builtin_mul_overflow((long long)(shape[d] - 1), v, &step) || __builtin_add_overflow(reach, step, &reach);
      }
      span[0] = empty ? 0 : (over ? LLONG_MAX : reach);
    }
    if (p->index_limit >= 0) {
      long long total = 1;
      int over = 0;
      if (strided) total = span[0];
      else for (d = 0; d < p->ndim; d++) over |= __builtin_mul_overflow(total, (long long)shape[d], &total);
      if (over || total > p->index_limit) {
        tl_index_limit_error(k, p, shape, 0, NULL, over ? LLONG_MAX : total);
        goto fail;
      }
    }
    memset(&proto, 0, sizeof proto);
    proto.device.device_type = k->device_type;
    proto.device.device_id = k->device_type == TL_DL_CPU ? 0 : dev_id;
    proto.ndim = strided ? 1 : p->ndim;
    proto.dtype.code = p->code;
    proto.dtype.bits = p->bits;
    proto.dtype.lanes = p->lanes;
    proto.shape = strided ? span : shape;
    if (k->api->managed_tensor_allocator(&proto, &m, NULL, tl_set_error) != 0 || m == NULL) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_MemoryError, "%U(): cannot allocate output '%U'", k->name, p->name);
      goto fail;
    }
    values[k->output_params[i]].p = (char *)m->dl_tensor.data + m->dl_tensor.byte_offset;
    if (k->api->managed_tensor_to_py_object_no_sync(m, (void **)&obj) != 0 || obj == NULL) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "%U(): cannot wrap output '%U'", k->name, p->name);
      goto fail;
    }
    if (strided) {
      PyObject *view = tl_as_strided(obj, shape, strides, p->ndim);
      Py_DECREF(obj);
      if (!view) goto fail;
      obj = view;
    }
    outs[n_outs_done++] = obj;
  }

  if (!k->parallel && k->gil_release_elems >= 0 && elems >= k->gil_release_elems) {
    Py_BEGIN_ALLOW_THREADS
    rc = k->entry(values, syms, stream, dev_id);
    Py_END_ALLOW_THREADS
  } else {
    rc = k->entry(values, syms, stream, dev_id);
  }
  if (rc != 0) {
    const char *failed = rc <= TL_DEVICE_ASSERT_FAILED && k->assert_message ? k->assert_message(rc) : NULL;
    const char *meaning = !failed && k->errstr ? k->errstr(rc) : NULL; /* NULL: a status it does not explain */
    if (failed)
      PyErr_Format(PyExc_RuntimeError, "%U() failed: %s", k->name, failed);
    else if (meaning)
      PyErr_Format(PyExc_RuntimeError, "%U() failed: %s (error %d)", k->name, meaning, rc);
    else
      PyErr_Format(PyExc_RuntimeError, "%U() failed: the kernel returned error code %d", k->name, rc);
    goto fail;
  }

  if (k->n_outputs == 0) Py_RETURN_NONE;
  if (k->n_outputs == 1) return outs[0];
  {
    PyObject *list = PyList_New(k->n_outputs);
    if (!list) goto fail;
    for (i = 0; i < k->n_outputs; i++) PyList_SET_ITEM(list, i, outs[i]);
    return list;
  }

fail:
  for (i = 0; i < n_outs_done; i++) Py_DECREF(outs[i]);
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* the type                                                                                   */

static void tl_kernel_dealloc(PyObject *self) {
  tl_kernel *k = (tl_kernel *)self;
  int i;
  PyObject_GC_UnTrack(self);
  if (k->weakreflist) PyObject_ClearWeakRefs(self);
  if (k->params) {
    for (i = 0; i < k->n_params; i++) Py_XDECREF(k->params[i].name);
    PyMem_Free(k->params);
  }
  if (k->sym_names) {
    for (i = 0; i < k->n_syms; i++) Py_XDECREF(k->sym_names[i]);
    PyMem_Free(k->sym_names);
  }
  if (k->sym_dtypes) {
    for (i = 0; i < k->n_syms; i++) Py_XDECREF(k->sym_dtypes[i]);
    PyMem_Free(k->sym_dtypes);
  }
  PyMem_Free(k->sym_high);
  if (k->expr_text) {
    for (i = 0; i < k->n_exprs; i++) Py_XDECREF(k->expr_text[i]);
    PyMem_Free(k->expr_text);
  }
  PyMem_Free(k->input_params);
  PyMem_Free(k->output_params);
  PyMem_Free(k->written_inputs);
  PyMem_Free(k->expr_code);
  PyMem_Free(k->expr_start);
  PyMem_Free(k->deferred);
  Py_XDECREF(k->name);
  Py_XDECREF(k->meta);
  Py_XDECREF(k->api_owner);
  Py_XDECREF(k->arg_names);
  Py_XDECREF((PyObject *)k->tensor_type);
  /* Each kernel object dlopen()ed its library once: give that reference back, so that a library
     no kernel uses any more is unmapped (every unpickle or tilelang.load maps a new copy: 5 maps and
     ~25 KB each, for the life of the process before, until dlopen failed). CUDA libraries stay
     loaded: their static CUDA runtime registered the kernels with the driver, and unloading them
     under a live context has not been tried on a GPU. */
  if (k->lib && k->device_type == TL_DL_CPU) dlclose(k->lib);
  Py_TYPE(self)->tp_free(self);
}

static int tl_kernel_traverse(PyObject *self, visitproc visit, void *arg) {
  tl_kernel *k = (tl_kernel *)self;
  Py_VISIT(k->meta);
  return 0;
}

static int tl_kernel_clear(PyObject *self) {
  tl_kernel *k = (tl_kernel *)self;
  Py_CLEAR(k->meta);
  return 0;
}

static PyObject *tl_kernel_repr(PyObject *self) {
  tl_kernel *k = (tl_kernel *)self;
  return PyUnicode_FromFormat("<tilelang cython kernel %U(%U) on %s>", k->name, k->arg_names,
                              k->device_type == TL_DL_CPU ? "cpu" : "cuda");
}

static PyObject *tl_kernel_get_meta(PyObject *self, void *closure) {
  tl_kernel *k = (tl_kernel *)self;
  (void)closure;
  if (!k->meta) Py_RETURN_NONE;
  Py_INCREF(k->meta);
  return k->meta;
}

static PyObject *tl_kernel_get_name(PyObject *self, void *closure) {
  tl_kernel *k = (tl_kernel *)self;
  (void)closure;
  Py_INCREF(k->name);
  return k->name;
}

static PyObject *tl_kernel_get_tensor_reader(PyObject *self, void *closure) {
  (void)closure;
  return PyUnicode_FromString(((tl_kernel *)self)->fast_read ? "torch" : "dlpack");
}

static PyGetSetDef tl_kernel_getset[] = {
    {"meta", tl_kernel_get_meta, NULL,
     "Dict with the call plan ('plan'), the shared library ('library') and the kept source ('source').", NULL},
    {"__name__", tl_kernel_get_name, NULL, "The kernel's name (artifact.name).", NULL},
    {"name", tl_kernel_get_name, NULL, "The kernel's name (artifact.name).", NULL},
    {"tensor_reader", tl_kernel_get_tensor_reader, NULL,
     "'torch': tensors are read through the optional _torch_reader first (DLPack for those it leaves); "
     "'dlpack': through DLPack only.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject tl_kernel_type = {
    PyVarObject_HEAD_INIT(NULL, 0) "tilelang_backend_cython.CythonKernel", /* tp_name */
    sizeof(tl_kernel),                                                    /* tp_basicsize */
};

static int tl_kernel_type_ready(void) {
  tl_kernel_type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  tl_kernel_type.tp_doc =
      "A compiled kernel of the cython backend. Call it with the kernel's non-output parameters in order "
      "(torch tensors and Python scalars), optionally stream=...; it returns the out_idx outputs.";
  tl_kernel_type.tp_vectorcall_offset = offsetof(tl_kernel, vectorcall);
  tl_kernel_type.tp_call = PyVectorcall_Call;
  tl_kernel_type.tp_dealloc = tl_kernel_dealloc;
  tl_kernel_type.tp_traverse = tl_kernel_traverse;
  tl_kernel_type.tp_clear = tl_kernel_clear;
  tl_kernel_type.tp_repr = tl_kernel_repr;
  tl_kernel_type.tp_getset = tl_kernel_getset;
  tl_kernel_type.tp_weaklistoffset = offsetof(tl_kernel, weakreflist);
  return PyType_Ready(&tl_kernel_type);
}

static tl_kernel *tl_kernel_alloc(int n_params, int n_syms, int n_exprs, int code_len) {
  tl_kernel *k;
  if (n_params > TL_MAX_PARAMS || n_syms > TL_MAX_SYMS) {
    PyErr_Format(PyExc_ValueError, "kernel has %d parameters and %d symbols; the cython backend supports at most %d and %d",
                 n_params, n_syms, TL_MAX_PARAMS, TL_MAX_SYMS);
    return NULL;
  }
  k = PyObject_GC_New(tl_kernel, &tl_kernel_type);
  if (!k) return NULL;
  memset((char *)k + sizeof(PyObject), 0, sizeof(tl_kernel) - sizeof(PyObject));
  k->vectorcall = tl_kernel_vectorcall;
  k->n_params = n_params;
  k->n_syms = n_syms;
  k->n_exprs = n_exprs;
  k->gil_release_elems = -1;
  k->params = (tl_param *)PyMem_Calloc((size_t)(n_params ? n_params : 1), sizeof(tl_param));
  k->input_params = (int *)PyMem_Calloc((size_t)(n_params ? n_params : 1), sizeof(int));
  k->output_params = (int *)PyMem_Calloc((size_t)(n_params ? n_params : 1), sizeof(int));
  k->written_inputs = (int *)PyMem_Calloc((size_t)(n_params ? n_params : 1), sizeof(int));
  k->deferred = (tl_deferred *)PyMem_Calloc((size_t)(n_params * TL_MAX_NDIM * 2 + 1), sizeof(tl_deferred));
  k->sym_names = (PyObject **)PyMem_Calloc((size_t)(n_syms ? n_syms : 1), sizeof(PyObject *));
  k->sym_dtypes = (PyObject **)PyMem_Calloc((size_t)(n_syms ? n_syms : 1), sizeof(PyObject *));
  k->sym_high = (long long *)PyMem_Calloc((size_t)(n_syms ? n_syms : 1), sizeof(long long));
  k->expr_text = (PyObject **)PyMem_Calloc((size_t)(n_exprs ? n_exprs : 1), sizeof(PyObject *));
  k->expr_start = (int *)PyMem_Calloc((size_t)(n_exprs ? n_exprs : 1), sizeof(int));
  k->expr_code = (long long *)PyMem_Calloc((size_t)(code_len ? code_len : 1), sizeof(long long));
  if (!k->params || !k->input_params || !k->output_params || !k->written_inputs || !k->deferred || !k->sym_names || !k->sym_dtypes || !k->sym_high || !k->expr_text ||
      !k->expr_start || !k->expr_code) {
    Py_DECREF(k);
    PyErr_NoMemory();
    return NULL;
  }
  PyObject_GC_Track((PyObject *)k);
  return k;
}

static int tl_kernel_open_library(tl_kernel *k, const char *path, const char *entry, const char *errstr,
                                  const char *launcher, const char *assert_message) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    PyErr_Format(PyExc_OSError, "cannot load kernel library %s: %s", path, dlerror());
    return -1;
  }
  k->entry = (tl_entry_fn)dlsym(lib, entry);
  if (!k->entry) {
    PyErr_Format(PyExc_OSError, "kernel library %s has no symbol %s", path, entry);
    dlclose(lib);
    return -1;
  }
  k->errstr = errstr && errstr[0] ? (tl_errstr_fn)dlsym(lib, errstr) : NULL;
  k->assert_message = assert_message && assert_message[0] ? (tl_assert_message_fn)dlsym(lib, assert_message) : NULL;
  if (launcher && launcher[0]) {
    /* the kernel's parallel block loops run on the dispatcher's pool (the variable is shared by
       every kernel object loading this library, all of them cython kernels) */
    tl_block_launcher_fn *slot = (tl_block_launcher_fn *)dlsym(lib, launcher);
    if (!slot) {
      PyErr_Format(PyExc_OSError, "kernel library %s has no block launcher variable %s", path, launcher);
      k->entry = NULL;
      dlclose(lib);
      return -1;
    }
    *slot = tl_block_launcher;
    k->parallel = 1;
  }
  k->lib = lib;
  return 0;
}

static const tl_dl_exchange_api *tl_api_from_capsule(PyObject *capsule) {
  const tl_dl_exchange_api *api =
      (const tl_dl_exchange_api *)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  if (!api) return NULL;
  if (api->header.version.major != 1) {
    PyErr_Format(PyExc_RuntimeError,
                 "torch's DLPack C exchange API has major version %u; the cython backend needs 1",
                 api->header.version.major);
    return NULL;
  }
  if (!api->managed_tensor_allocator || !api->managed_tensor_from_py_object_no_sync ||
      !api->managed_tensor_to_py_object_no_sync || !api->current_work_stream) {
    PyErr_SetString(PyExc_RuntimeError, "torch's DLPack C exchange API table is incomplete");
    return NULL;
  }
  return api;
}

/* (data, device_type, device_id, dtype (code, bits, lanes), shape, strides or None) as `fn` reads
 * `obj`, or None where `fn` declines it (the fast reader) or fails (DLPack: its error is cleared).
 * Only for _dispatch.pyx's comparison of the two readers; never on the call path. */
static PyObject *tl_describe_read(tl_dl_tensor_from_py_fn fn, PyObject *obj) {
  tl_dl_tensor t;
  PyObject *shape, *strides;
  int d;
  if (fn(obj, &t) != 0) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  shape = PyTuple_New(t.ndim);
  strides = t.strides ? PyTuple_New(t.ndim) : (Py_INCREF(Py_None), Py_None);
  if (!shape || !strides) {
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
  }
  for (d = 0; d < t.ndim; d++) {
    PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong((long long)t.shape[d]));
    if (t.strides) PyTuple_SET_ITEM(strides, d, PyLong_FromLongLong((long long)t.strides[d]));
  }
  return Py_BuildValue("(KiiiiiNN)", (unsigned long long)((uintptr_t)t.data + t.byte_offset), t.device.device_type,
                       t.device.device_id, t.dtype.code, t.dtype.bits, t.dtype.lanes, shape, strides);
}

#endif /* TL_CY_DISPATCH_CORE_H */
