"""The launch plan: the device kernels to launch, in order, with their buffers, scalars and sizes.

Made from the artifact at build time and saved as ``metal_plan.json`` next to the source; on load it
is made again from the artifact and must be identical. Format 1::

    {
      "format": 1, "name": "vector_add", "outputs": [2],
      "source": "kernel.metal", "source_sha256": "...",
      "kernels": [                                   # launched in this order, on torch's MPS stream
        {"name": "main_kernel",
         "grid": ["(n + 127) // 128", 1, 1],         # threadgroups, as the artifact counts them
         "block": [128, 1, 1],                        # threads per threadgroup
         "threads": ["((n + 127) // 128) * 128", 1, 1],   # total threads: grid x block
         "group_size": [128, 1, 1],                   # = block
         "buffers": [{"buffer": 0, "name": "A", "dtype": "float32", "param_index": 0}, ...],
         "scalars": {"buffer": 3, "type_name": "main_kernel_args_t", "size": 8,
                     "slots": [{"field": "n", "offset": 0, "dtype": "int32", "size": 8, "symbol": "n"}]}}
      ]
    }

``threads`` and ``group_size`` are what ``torch.mps.compile_shader`` kernels take: Metal's
``dispatchThreads`` counts threads, not threadgroups, so the artifact's grid (threadgroups per
dimension) is multiplied by the block. Every dimension is a whole number of threadgroups, so no
threadgroup is partial and ``[[threadgroup_position_in_grid]]`` is the artifact's block index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from tilelang_core import symbolic
from tilelang_core.artifact import Dim, KernelArtifact, ScalarSlot, ScalarStruct
from tilelang_core.errors import BuildError

from .packing import ScalarPacker

PLAN_FORMAT = 1

#: Most bytes Metal's ``setBytes`` takes for one argument (the scalar struct).
MAX_SCALAR_BYTES = 4096


def total_threads(grid: Dim, block: Dim) -> Dim:
    """``grid * block`` as an int, or as an expression when either is one."""
    if isinstance(grid, int) and isinstance(block, int):
        return grid * block
    left = str(grid) if isinstance(grid, int) else f"({grid})"
    right = str(block) if isinstance(block, int) else f"({block})"
    return f"{left} * {right}"


def make_plan(artifact: KernelArtifact, out_idx: list[int]) -> dict[str, Any]:
    """The launch plan of ``artifact`` (without the source fields, which the build adds).

    :raises BuildError: no device kernels, a kernel without launch configuration, an argument
        that comes from nowhere, or a scalar struct Metal cannot be given.
    """
    if not artifact.device_kernels:
        raise BuildError(f"metal: kernel {artifact.name!r} has no device kernels to launch")
    kernels = []
    for kernel in artifact.device_kernels:
        launch = kernel.launch
        if launch is None:
            raise BuildError(f"metal: device kernel {kernel.name!r} of {artifact.name!r} has no launch configuration")
        buffers = []
        for arg in kernel.args:
            if arg.kind != "pointer":
                continue
            if arg.param_index is None:
                raise BuildError(f"metal: pointer argument {arg.name!r} of {kernel.name!r} comes from no parameter")
            buffers.append({"buffer": len(buffers), "name": arg.name, "dtype": arg.dtype, "param_index": arg.param_index})
        scalars = None
        if any(a.kind == "scalar" for a in kernel.args):
            struct = kernel.scalar_struct
            if struct is None:
                raise BuildError(
                    f"metal: device kernel {kernel.name!r} of {artifact.name!r} takes scalars, but the artifact does not "
                    "describe their struct (DeviceKernel.scalar_struct); lower the kernel again with this tilelang-core"
                )
            if struct.size > MAX_SCALAR_BYTES:
                raise BuildError(f"metal: device kernel {kernel.name!r} takes {struct.size} bytes of scalars; Metal "
                                 f"passes at most {MAX_SCALAR_BYTES} bytes by value")
            scalars = {
                "buffer": struct.binding,
                "type_name": struct.type_name,
                "size": struct.size,
                "slots": [_slot(kernel.name, kernel.args[s.arg], s) for s in struct.slots],
            }
        kernels.append(
            {
                "name": kernel.name,
                "grid": list(launch.grid),
                "block": list(launch.block),
                "threads": [total_threads(g, b) for g, b in zip(launch.grid, launch.block)],
                "group_size": list(launch.block),
                "buffers": buffers,
                "scalars": scalars,
            }
        )
    return {"format": PLAN_FORMAT, "name": artifact.name, "outputs": sorted(out_idx), "kernels": kernels}


def _slot(kernel: str, arg: Any, slot: ScalarSlot) -> dict[str, Any]:
    entry: dict[str, Any] = {"field": slot.field, "offset": slot.offset, "dtype": slot.dtype, "size": slot.size}
    if arg.param_index is not None:
        entry["param_index"] = arg.param_index
    elif arg.symbol is not None:
        entry["symbol"] = arg.symbol
    else:
        raise BuildError(f"metal: scalar argument {arg.name!r} of device kernel {kernel!r} comes from nowhere")
    return entry


@dataclass
class KernelLaunch:
    """One device kernel, ready to launch: compiled size expressions, buffers, scalar packer."""

    name: str
    threads: list[Callable[[dict], int]]
    group_size: list[Callable[[dict], int]]
    static_sizes: Optional[tuple[tuple[int, ...], tuple[int, ...]]]
    """(threads, group_size) when neither depends on a symbol."""
    static_group: Optional[tuple[int, ...]]
    """group_size when it depends on no symbol (as for every T.Kernel(..., threads=<int>))."""
    buffers: list[int]
    """Parameter index of the tensor bound to buffer(0), buffer(1), ..."""
    scalars: list[tuple[str, Any]]
    """Per struct slot in offset order: ('param', parameter index) or ('symbol', name)."""
    packer: Optional[ScalarPacker]

    def sizes(self, symbols: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(threads, group_size)`` for the bound symbols."""
        if self.static_sizes is not None:
            return self.static_sizes
        return tuple(int(f(symbols)) for f in self.threads), tuple(int(f(symbols)) for f in self.group_size)


def launches(plan: dict[str, Any]) -> list[KernelLaunch]:
    """Turn the plan's kernels into :class:`KernelLaunch` objects (expressions compiled once)."""
    result = []
    for kernel in plan["kernels"]:
        exprs = [*kernel["threads"], *kernel["group_size"]]
        compiled = [symbolic.compile_expr(e) for e in exprs]
        static = None
        if all(isinstance(e, int) for e in exprs):
            static = (tuple(kernel["threads"]), tuple(kernel["group_size"]))
        packer = None
        scalars: list[tuple[str, Any]] = []
        if kernel["scalars"] is not None:
            s = kernel["scalars"]
            slots = [ScalarSlot(arg=k, field=x["field"], offset=x["offset"], dtype=x["dtype"], size=x["size"])
                     for k, x in enumerate(s["slots"])]
            packer = ScalarPacker(ScalarStruct(type_name=s["type_name"], binding=s["buffer"], size=s["size"], slots=slots))
            by_position = {k: x for k, x in enumerate(s["slots"])}
            for k in packer.args:
                x = by_position[k]
                scalars.append(("param", x["param_index"]) if "param_index" in x else ("symbol", x["symbol"]))
        result.append(
            KernelLaunch(
                name=kernel["name"],
                threads=compiled[0:3],
                group_size=compiled[3:6],
                static_sizes=static,
                static_group=tuple(kernel["group_size"]) if all(isinstance(e, int) for e in kernel["group_size"]) else None,
                buffers=[b["param_index"] for b in kernel["buffers"]],
                scalars=scalars,
                packer=packer,
            )
        )
    return result
