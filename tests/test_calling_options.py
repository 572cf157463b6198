"""The declared options of the core's ``CallChecker`` (tilelang_core/calling.py) that the Python
backends use instead of checking calls themselves: ``device_type`` (the device every tensor must be
on, named in the messages), ``overlap="storage"`` (only views of one storage can overlap) and
``bind(..., allocate=False)`` + ``allocate`` (outputs allocated in the backend's own context)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import tilelang_core.language as T
from tilelang_core.calling import CallChecker
from tilelang_core.errors import BuildError
from tilelang_core.jit.outputs import bind_symbols_from_inputs
from tilelang_core.lowering import lower


def vadd(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    C[bx * 64 + i] = A[bx * 64 + i] + B[bx * 64 + i]

    return main


def test_device_type_decides_where_tensors_must_be_and_what_the_messages_say():
    art = lower(vadd(16), target="cuda -arch=sm_90")  # parameters on the 'cuda' family
    a = torch.zeros(16)
    with pytest.raises(ValueError, match=r"^main\(\) argument 'A' \(#0\): expected a tensor on cuda, got cpu$"):
        CallChecker(art).bind((a, a.clone(), a.clone()))
    standin = CallChecker(art, device_type="cpu")  # e.g. a CPU stand-in of the device in tests
    call = standin.bind((a, a.clone(), a.clone()))
    assert call.device == torch.device("cpu") and call.result() is None
    with pytest.raises(ValueError, match=r"^main\(\) argument 'B' \(#1\): expected a tensor on cpu, got meta$"):
        standin.bind((a, torch.empty(16, device="meta"), a.clone()))


def test_storage_overlap_compares_only_views_of_one_storage():
    art = lower(vadd(16), target="c")
    by_address, by_storage = CallChecker(art), CallChecker(art, overlap="storage")
    buf = torch.zeros(32)
    for checker in (by_address, by_storage):  # views of one storage: both rules refuse
        with pytest.raises(ValueError, match=r"^main\(\) arguments 'A' \(#0\) and 'C' \(#2\) overlap in memory"):
            checker.bind((buf[0:16], torch.zeros(16), buf[1:17]))
        checker.bind((buf[0:16], buf[0:16], buf[16:32]))  # read-only aliases and adjacent views are fine
    # two storages over the same bytes (what a device whose data_ptr() is a handle never has):
    # the address rule sees the overlap, the storage rule by its definition does not
    raw = bytearray(4 * 20)
    a = torch.frombuffer(raw, dtype=torch.float32, count=16)
    c = torch.frombuffer(raw, dtype=torch.float32, count=16, offset=8)
    assert a.untyped_storage().data_ptr() != c.untyped_storage().data_ptr()
    with pytest.raises(ValueError, match="overlap in memory"):
        by_address.bind((a, torch.zeros(16), c))
    by_storage.bind((a, torch.zeros(16), c))
    with pytest.raises(BuildError, match="overlap must be one of address, storage, got 'bytes'"):
        CallChecker(art, overlap="bytes")


def test_outputs_are_sized_and_refused_in_bind_and_allocated_later():
    art = bind_symbols_from_inputs(lower(vadd(T.dynamic("n")), target="c"), [2])
    checker = CallChecker(art, [2])
    a = torch.ones(10)
    call = checker.bind((a, a), allocate=False)
    assert call.output_shapes == [[10]] and call.values[2] is None and call.outputs == []
    (out,) = checker.allocate(call)
    assert out.shape == (10,) and call.values[2] is out and call.result() is out
    with pytest.raises(ValueError, match=r"^main\(\) argument 'B' \(#1\): shape\[0\] binds symbol 'n' = 9"):
        checker.bind((a, torch.ones(9)), allocate=False)  # every check still runs


def test_a_dtype_torch_does_not_have_is_refused_when_the_checker_is_made():
    art = lower(vadd(16), target="c")
    odd = art.replace(params=[dataclasses.replace(art.params[0], dtype="float13"), *art.params[1:]])
    with pytest.raises(BuildError, match=r"^main: parameter 'A' has dtype 'float13', which has no torch equivalent"):
        CallChecker(odd)


def test_check_status_takes_a_function_for_the_assertion_text_and_says_so_when_given_text():
    art = lower(vadd(16), target="c")
    call = CallChecker(art).bind((torch.zeros(16), torch.zeros(16), torch.zeros(16)))
    call.check_status(0, "ignored: the status is 0")
    with pytest.raises(RuntimeError, match=r"^main\(\) failed: T.device_assert failed at x.py:3: no$"):
        call.check_status(-3, lambda status: b"T.device_assert failed at x.py:3: no")
    texts = {-3: "T.device_assert failed at x.py:3: first", -5: "T.device_assert failed at x.py:7: third"}
    with pytest.raises(RuntimeError, match=r"^main\(\) failed: T.device_assert failed at x.py:7: third$"):
        call.check_status(-5, texts.get)  # the status says which check failed
    with pytest.raises(RuntimeError, match=r"^main\(\) failed: the kernel returned error code -3$"):
        call.check_status(-3)
    with pytest.raises(RuntimeError, match=r"^main\(\) failed: the kernel returned error code -4$"):
        call.check_status(-4, texts.get)  # no text for that status
    with pytest.raises(TypeError, match=r"check_status: assert_message must be a function that takes the status "
                                        r"and returns the assertion's text .* got str 'main_assert_message'; this is a bug in the backend"):
        call.check_status(-3, "main_assert_message")
