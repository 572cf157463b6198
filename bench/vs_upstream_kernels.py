"""Kernels of bench/vs_upstream.py, in upstream TileLang's syntax: both sides build them from this file."""
import tilelang.language as T


def add(N, block=256):
    @T.prim_func
    def add(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return add


def matmul(M, N, K, block_M=32, block_N=32, block_K=32):
    @T.prim_func
    def matmul(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_local = T.alloc_local((block_M, block_K), "float32")
            B_local = T.alloc_local((block_K, block_N), "float32")
            C_local = T.alloc_local((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(K // block_K, num_stages=0):
                T.copy(A[by * block_M, ko * block_K], A_local)
                T.copy(B[ko * block_K, bx * block_N], B_local)
                for i, j, k in T.grid(block_M, block_N, block_K):
                    C_local[i, j] += A_local[i, k] * B_local[k, j]
            T.copy(C_local, C[by * block_M, bx * block_N])
    return matmul


def rowsum(M, N, block_M=16):
    @T.prim_func
    def rowsum(A: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            for i in T.serial(block_M):
                acc = T.alloc_var("float32")
                acc = 0.0
                for j in T.serial(N):
                    acc = acc + A[bx * block_M + i, j]
                S[bx * block_M + i] = acc
    return rowsum
