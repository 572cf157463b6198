/* Force-included into TVM's generated C host sources (target "c") by tilelang-backend-tvmffi.
 * TVM's C code generator spells float16 as `half` but declares no such type. */
#ifndef TILELANG_TVMFFI_C_HOST_PREAMBLE_H
#define TILELANG_TVMFFI_C_HOST_PREAMBLE_H
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
typedef _Float16 half;
#endif
#endif
