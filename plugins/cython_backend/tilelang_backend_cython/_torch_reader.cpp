/*
 * Optional fast tensor reader of the cython backend's dispatcher (built at install time only when
 * torch is importable there; see setup.py and README "Dispatch").
 *
 * tl_torch_read fills the same DLTensor view that torch's DLPack C exchange API
 * (`dltensor_from_py_object_no_sync`) gives, straight from the tensor's TensorImpl through
 * torch's C++ extension API (THPVariable_Unpack, at::Tensor accessors): about 7 ns a tensor
 * instead of about 50 ns. It handles only the plain case (dense strided CPU or CUDA tensor with
 * storage, no Python dispatch or symbolic sizes, a dtype in the table below) and answers 1 for
 * anything else, and for any C++ exception: the dispatcher then asks DLPack, which reads the
 * unusual tensors and words their errors. It answers 2 for a tensor whose storage is smaller
 * than the view and 3 for a lazy conjugate or negative view (DLPack says neither: it describes the
 * data as stored), which the dispatcher refuses. It never sets a Python error.
 *
 * The C++ API is not ABI-stable across torch releases, so the module records the torch version it
 * was built against (TORCH_VERSION) and _dispatch.pyx uses it only under that same version, after
 * comparing its answers with DLPack's on a set of probe tensors.
 */
#include <Python.h>

#include <torch/csrc/autograd/python_variable.h>

extern "C" {
#include "_tl_dlpack.h"
}

#ifndef TL_TORCH_VERSION
#define TL_TORCH_VERSION "unknown"
#endif

namespace {

int32_t cuda_dl_type = TL_DL_CUDA; /* kDLROCM (10) under a ROCm torch, set by set_cuda_device_type */

/* DLPack's code for a torch dtype (torch's own mapping); -1: leave the tensor to DLPack */
inline int dl_code(c10::ScalarType st) {
  switch (st) {
    case c10::ScalarType::Byte:
    case c10::ScalarType::UInt16:
    case c10::ScalarType::UInt32:
    case c10::ScalarType::UInt64: return 1;
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long: return 0;
    case c10::ScalarType::Half:
    case c10::ScalarType::Float:
    case c10::ScalarType::Double: return 2;
    case c10::ScalarType::BFloat16: return 4;
    case c10::ScalarType::ComplexHalf:
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::ComplexDouble: return 5;
    case c10::ScalarType::Bool: return 6;
    default: return -1;
  }
}

}  // namespace

/* 0: `out` describes `obj` (a torch.Tensor, checked by the caller); 1: ask DLPack instead;
   2: `out` describes `obj`, but its storage is too small for it (refused by the caller);
   3: `obj` is a lazy conjugate or negative view, whose elements are not the stored values (refused
   by the caller: reading it as stored would give the kernel the un-negated data) */
extern "C" int tl_torch_read(void *py_obj, tl_dl_tensor *out) noexcept {
  try {
    const at::Tensor &t = THPVariable_Unpack(static_cast<PyObject *>(py_obj));
    if (!t.defined()) return 1;
    c10::TensorImpl *impl = t.unsafeGetTensorImpl();
    if (impl->is_python_dispatch() || impl->has_symbolic_sizes_strides() || !impl->has_storage()) return 1;
    if (impl->layout() != c10::kStrided) return 1;
    /* two bits of the dispatch key set: a contiguous negative view (.imag of a conjugate view
       through as_strided) passes every stride check, so it is refused here, at no cost */
    if (impl->is_conj() || impl->is_neg()) return 3;
    int code = dl_code(impl->dtype().toScalarType());
    if (code < 0) return 1;
    switch (impl->device_type()) {
      case c10::DeviceType::CPU:
        out->device.device_type = TL_DL_CPU;
        out->device.device_id = 0;
        break;
      case c10::DeviceType::CUDA:
        out->device.device_type = cuda_dl_type;
        out->device.device_id = static_cast<int32_t>(static_cast<unsigned char>(impl->device().index()));
        break;
      default:
        return 1;
    }
    out->dtype.code = static_cast<uint8_t>(code);
    out->dtype.bits = static_cast<uint8_t>(impl->itemsize() * 8);
    out->dtype.lanes = 1;
    out->ndim = static_cast<int32_t>(impl->dim());
    out->shape = const_cast<int64_t *>(impl->sizes().data());
    out->strides = const_cast<int64_t *>(impl->strides().data());
    out->data = t.data_ptr(); /* the mutable pointer, as DLPack gives (materializes a copy-on-write) */
    out->byte_offset = 0;
    /* 2: the storage does not hold every element of the view (freed or shrunk with
       untyped_storage().resize_(), as FSDP and activation offloading do); reading or writing
       it would go past the allocation */
    if (impl->numel() > 0) {
      uint64_t last = static_cast<uint64_t>(impl->storage_offset());
      for (int64_t d = 0; d < impl->dim(); d++) {
        int64_t st = impl->strides()[d];
        last += static_cast<uint64_t>(impl->sizes()[d] - 1) * static_cast<uint64_t>(st < 0 ? -st : st);
      }
      if ((last + 1) * static_cast<uint64_t>(impl->itemsize()) > impl->storage().nbytes()) return 2;
    }
    return 0;
  } catch (...) {
    return 1;
  }
}

static PyObject *set_cuda_device_type(PyObject *, PyObject *arg) {
  long v = PyLong_AsLong(arg);
  if (v == -1 && PyErr_Occurred()) return nullptr;
  cuda_dl_type = static_cast<int32_t>(v);
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_cuda_device_type", set_cuda_device_type, METH_O,
     "DLPack device type that torch's CUDA tensors get (2; 10 under a ROCm build of torch)."},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_torch_reader",
                                        "Fast tensor reader of the cython dispatcher (see _torch_reader.cpp).",
                                        -1, methods};

PyMODINIT_FUNC PyInit__torch_reader(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return nullptr;
  PyObject *cap = PyCapsule_New(reinterpret_cast<void *>(&tl_torch_read), "tilelang_backend_cython.tensor_reader",
                                nullptr);
  if (!cap || PyModule_AddObject(m, "reader", cap) != 0) {
    Py_XDECREF(cap);
    Py_DECREF(m);
    return nullptr;
  }
  if (PyModule_AddStringConstant(m, "TORCH_VERSION", TL_TORCH_VERSION) != 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
