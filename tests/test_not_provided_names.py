"""Names of upstream TileLang's ``T.`` namespace that this package does not provide: the
``AttributeError`` says why and what to do instead (language/not_provided.py), where it was
Python's bare "has no attribute" (a kernel calling ``T.rng_init`` stopped there)."""

from __future__ import annotations

import pytest

import tilelang.language as T
from tilelang_core.language.not_provided import _BY_NAME, why_not_provided


@pytest.mark.parametrize("name,words", [("rng_init", "pass random numbers in as a tensor"),
                                        ("tma_copy", "emits portable CUDA C"), ("wgmma_gemm", "emits portable CUDA C"),
                                        ("gemm_sp", "2:4 sparse"), ("Ref", "store through them"),
                                        ("annotate_l2_hit_ratio", "sets itself"), ("dyn", "write T.dynamic('K')")])
def test_an_upstream_name_says_why_it_is_missing(name, words):
    with pytest.raises(AttributeError) as info:
        getattr(T, name)
    text = str(info.value)
    assert text.startswith(f"module 'tilelang_core.language' has no attribute '{name}': T.{name} is not provided by "
                           "tilelang-core: ") and words in text, text
    assert info.value.name == name and not hasattr(T, name)


def test_an_unknown_name_keeps_pythons_message():
    with pytest.raises(AttributeError) as info:
        T.no_such_operator  # noqa: B018
    assert str(info.value) == "module 'tilelang_core.language' has no attribute 'no_such_operator'"


def test_no_reason_is_given_for_a_name_the_language_has():
    present = [name for name in _BY_NAME if name in vars(T)]
    assert not present, f"these names exist, but not_provided.py says why they do not: {present}"
    assert why_not_provided("copy") is None and "copy" in vars(T)


def test_a_kernel_using_one_stops_with_the_reason():
    with pytest.raises(Exception, match=r"T\.rng_init is not provided by tilelang-core: curand generator states"):

        @T.prim_func
        def noise(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                T.rng_init(1, 0, 0)
                A[0] = 0.0
