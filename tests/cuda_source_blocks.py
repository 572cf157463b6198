"""Cut blocks out of generated CUDA source text, for tests that check where barriers went."""

from __future__ import annotations


def braced(body: str, start: int) -> str:
    """``body`` from ``start`` to the brace that closes the first ``{`` after it."""
    depth = 0
    for k in range(body.index("{", start), len(body)):
        depth += {"{": 1, "}": -1}.get(body[k], 0)
        if depth == 0:
            return body[start:k + 1]
    raise AssertionError(body)


def if_block(body: str, cond: str) -> str:
    """The source of the ``if (<cond>) { ... }`` block of ``body`` (up to its closing brace)."""
    return braced(body, body.index(f"if ({cond})"))


def kernel_body(source: str) -> str:
    """The CUDA source from its last ``extern "C" __global__`` function on (the kernel, not the helpers)."""
    return source[source.rindex('extern "C" __global__'):]
