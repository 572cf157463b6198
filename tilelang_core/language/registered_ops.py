"""TVM operators this package adds to TVM's op registry: ``tl.access_ptr``.

TileLang's compiler registers ``tl.access_ptr`` in C++; TVM 0.27 has no such op. It is registered
here from Python, once per process: :func:`access_ptr_op` creates it the first time it is asked
for (or finds it when another library, or an earlier call, already registered it) and sets only
the attributes still missing, so importing this module again or calling it twice never fails.

``tl.access_ptr(base, extent, rw_mask)`` is the pointer ``T.access_ptr`` returns: ``base`` is a
``BufferLoad`` (the first element), ``extent`` the number of elements behind it, ``rw_mask`` 1
(read), 2 (write) or 3 (both). :mod:`tilelang_core.lowering.access_ptr` rewrites it to TVM's
``tirx.tvm_access_ptr``, which TVM's passes and code generators know.
"""

from __future__ import annotations

import sys
import threading
from typing import Any
from ..fork_locks import renew_after_fork

__all__ = ["ACCESS_PTR_OP", "ADDRESS_OPS", "access_ptr_op"]

#: Name of the operator (the same as TileLang's).
ACCESS_PTR_OP = "tl.access_ptr"
#: Calls that take the address of a buffer element: their buffer-load arguments are addresses, not reads.
ADDRESS_OPS = ("tirx.address_of", "tirx.tvm_access_ptr", ACCESS_PTR_OP)

_LOCK = threading.Lock()
renew_after_fork(sys.modules[__name__], "_LOCK")  # a fork child gets a fresh one
_DONE: list = []


def _set_missing(op_name: str, attrs: dict) -> None:
    from tvm.ir import _ffi_api
    from tvm.ir.op import register_op_attr

    if op_name not in set(_ffi_api.ListOpNames()):
        register_op_attr(op_name, "TCallEffectKind", attrs["TCallEffectKind"])  # creates the op
    op = _ffi_api.GetOp(op_name)
    for key, value in attrs.items():
        # OpHasAttr answers whether *some* op has the attribute; OpGetAttr gives None for this one
        if _ffi_api.OpGetAttr(op, key) is None:
            register_op_attr(op_name, key, value)


def access_ptr_op() -> Any:
    """The ``tl.access_ptr`` operator (``tvm.ir.Op``), registered with TVM on first use.

    Its call effect is that of TVM's ``tvm_access_ptr`` (a special call argument: passes keep it
    where it is and do not read it as a value), and TVMScript prints it as ``T.tl.access_ptr``.
    """
    import tvm
    from tvm.ir import _ffi_api

    if not _DONE:
        with _LOCK:
            if not _DONE:
                model = tvm.ir.Op.get("tirx.tvm_access_ptr")
                _set_missing(
                    ACCESS_PTR_OP,
                    {
                        "TCallEffectKind": _ffi_api.OpGetAttr(model, "TCallEffectKind"),
                        "TScriptPrinterName": ACCESS_PTR_OP,
                    },
                )
                _DONE.append(True)
    return tvm.ir.Op.get(ACCESS_PTR_OP)
