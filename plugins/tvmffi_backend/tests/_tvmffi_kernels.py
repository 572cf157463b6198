"""TVMScript kernels for the tvm_ffi backend tests (compiled with tvm.compile, no TileLang lowering)."""

from tvm.script import tirx as T


@T.prim_func
def scale_add(a: T.handle, b: T.handle, c: T.handle, alpha: T.float32):
    """C = A + alpha * B over (n, 4) float32 tensors; n is dynamic."""
    n = T.int32()
    A = T.match_buffer(a, (n, 4), "float32")
    B = T.match_buffer(b, (n, 4), "float32")
    C = T.match_buffer(c, (n, 4), "float32")
    for i, j in T.grid(n, 4):
        C[i, j] = A[i, j] + alpha * B[i, j]


@T.prim_func
def pad1(a: T.handle, b: T.handle):
    """B = [0, A..., 0]: the output's length is the expression n + 2."""
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n + 2,), "float32")
    for i in range(n + 2):
        B[i] = T.if_then_else(i >= 1 and i <= n, A[i - 1], T.float32(0))


@T.prim_func
def iota(m: T.int32, a: T.handle):
    """A[i] = i * 3 for i < m; the length comes from the scalar parameter m."""
    A = T.match_buffer(a, (m,), "int32")
    for i in range(m):
        A[i] = i * 3


@T.prim_func
def matmul(a: T.handle, b: T.handle, c: T.handle):
    """C (m, 32) = A (m, 16) @ B (16, 32), rows in parallel (uses TVM's thread pool)."""
    m = T.int32()
    A = T.match_buffer(a, (m, 16), "float32")
    B = T.match_buffer(b, (16, 32), "float32")
    C = T.match_buffer(c, (m, 32), "float32")
    for i in T.parallel(m):
        for j in range(32):
            C[i, j] = T.float32(0)
            for k in range(16):
                C[i, j] = C[i, j] + A[i, k] * B[k, j]


@T.prim_func
def split_sum(a: T.handle, s: T.handle, d: T.handle):
    """Two outputs: S = A[:, 0] + A[:, 1], D = A[:, 0] - A[:, 1] over (n, 2) float64."""
    n = T.int32()
    A = T.match_buffer(a, (n, 2), "float64")
    S = T.match_buffer(s, (n,), "float64")
    D = T.match_buffer(d, (n,), "float64")
    for i in range(n):
        S[i] = A[i, 0] + A[i, 1]
        D[i] = A[i, 0] - A[i, 1]


@T.prim_func
def vec_add_cuda(a: T.handle, b: T.handle, c: T.handle):
    """CUDA vector add over a dynamic length n, 128 threads per block."""
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    for bx in T.thread_binding((n + 127) // 128, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if bx * 128 + tx < n:
                C[bx * 128 + tx] = A[bx * 128 + tx] + B[bx * 128 + tx]


@T.prim_func
def vadd_elem_aligned(a: T.handle, b: T.handle, c: T.handle):
    """Vectorised add whose buffers declare element alignment only (align=4): no 64-byte assumption."""
    n = T.int32()
    A = T.match_buffer(a, (n, 64), "float32", align=4)
    B = T.match_buffer(b, (n, 64), "float32", align=4)
    C = T.match_buffer(c, (n, 64), "float32", align=4)
    for i in T.parallel(n):
        for j in T.vectorized(64):
            C[i, j] = A[i, j] + B[i, j]
