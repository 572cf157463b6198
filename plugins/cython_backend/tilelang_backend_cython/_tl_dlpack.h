/*
 * Minimal declarations of the DLPack 1.x ABI used by the dispatcher.
 *
 * Written from the DLPack specification (https://dmlc.github.io/dlpack/) so the plugin builds
 * without torch's headers. Only the layout matters here: these structs must match the ABI of
 * DLPack major version 1, including the `__dlpack_c_exchange_api__` function table (DLPack 1.3).
 */
#ifndef TL_CY_DLPACK_H
#define TL_CY_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#define TL_DL_CPU 1
#define TL_DL_CUDA 2
#define TL_DL_CUDA_HOST 3
#define TL_DL_METAL 8
#define TL_DL_ROCM 10
#define TL_DL_CUDA_MANAGED 13

typedef struct {
  uint32_t major;
  uint32_t minor;
} tl_dl_version;

typedef struct {
  int32_t device_type; /* an enum in the spec: int-sized */
  int32_t device_id;
} tl_dl_device;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} tl_dl_dtype;

typedef struct {
  void *data;
  tl_dl_device device;
  int32_t ndim;
  tl_dl_dtype dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} tl_dl_tensor;

typedef struct tl_dl_managed_versioned {
  tl_dl_version version;
  void *manager_ctx;
  void (*deleter)(struct tl_dl_managed_versioned *self);
  uint64_t flags;
  tl_dl_tensor dl_tensor;
} tl_dl_managed_versioned;

typedef int (*tl_dl_allocator_fn)(tl_dl_tensor *prototype, tl_dl_managed_versioned **out,
                                  void *error_ctx,
                                  void (*set_error)(void *error_ctx, const char *kind,
                                                    const char *message));
typedef int (*tl_dl_managed_from_py_fn)(void *py_object, tl_dl_managed_versioned **out);
typedef int (*tl_dl_managed_to_py_fn)(tl_dl_managed_versioned *tensor, void **out_py_object);
typedef int (*tl_dl_tensor_from_py_fn)(void *py_object, tl_dl_tensor *out);
typedef int (*tl_dl_current_stream_fn)(int32_t device_type, int32_t device_id, void **out_stream);

typedef struct tl_dl_api_header {
  tl_dl_version version;
  struct tl_dl_api_header *prev_api;
} tl_dl_api_header;

typedef struct {
  tl_dl_api_header header;
  tl_dl_allocator_fn managed_tensor_allocator;
  tl_dl_managed_from_py_fn managed_tensor_from_py_object_no_sync;
  tl_dl_managed_to_py_fn managed_tensor_to_py_object_no_sync;
  tl_dl_tensor_from_py_fn dltensor_from_py_object_no_sync; /* may be NULL */
  tl_dl_current_stream_fn current_work_stream;
} tl_dl_exchange_api;

#endif /* TL_CY_DLPACK_H */
