"""TVM names TileLang code spells the way its bundled TVM does (tvm.tirx.Call, tvm.arith,
tvm.tirx.stmt_functor, expr.dtype), provided over TVM 0.27 by tilelang_core.language.tvm_names."""

from __future__ import annotations

import subprocess
import sys

import tilelang
import tilelang.language as T
from tilelang import tvm
from tvm import ir, tirx


def _scale_kernel():
    @T.prim_func
    def scale(X: T.Tensor((8,), T.float32), Y: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                Y[i] = T.exp(X[i]) * T.float32(2)

    return scale


def test_call_and_primexpr_classes_live_in_tirx_too():
    x = tirx.Var("x", "float32")
    call = T.exp(x)
    assert tirx.Call is ir.Call and isinstance(call, tirx.Call)
    assert isinstance(call, tirx.PrimExpr) and tirx.StringImm is ir.StringImm


def test_every_scalar_expression_has_a_dtype():
    x = tirx.Var("x", "float16")
    n = T.int32()
    assert T.exp(x).dtype == "float16"
    assert (x + x).dtype == "float16" and n.dtype == "int32"
    assert T.float32(1.5).dtype == "float32" and T.cast(n, T.float64).dtype == "float64"
    assert T.float16x2(x, x).dtype == "float16x2"
    assert tirx.Var("p", ir.PointerType(ir.PrimType("float32"))).dtype == "handle"


def test_buffers_keep_their_element_dtype():
    func = _scale_kernel()
    buffer = func.params[0]
    assert buffer.dtype == "float32" and [int(d) for d in buffer.shape] == [8]


def test_post_order_visit_sees_children_before_parents():
    from tvm.tirx.stmt_functor import post_order_visit

    order = []
    post_order_visit(_scale_kernel().body, lambda node: order.append(type(node).__name__))
    assert order.index("Call") < order.index("BufferStore") < order.index("For")
    calls = []
    tirx.stmt_functor.post_order_visit(
        _scale_kernel().body, lambda node: calls.append(node) if isinstance(node, tirx.Call) else None
    )
    assert [str(c.op.name) for c in calls] == ["tirx.exp"]


def test_pre_order_visit_stops_where_the_callback_says_false():
    from tvm.tirx.stmt_functor import pre_order_visit

    seen = []

    def visit(node):
        seen.append(type(node).__name__)
        return not isinstance(node, tirx.BufferStore)  # do not descend into stores

    pre_order_visit(_scale_kernel().body, visit)
    assert seen.index("For") < seen.index("BufferStore")
    assert "Call" not in seen


def test_arith_is_tvm_sym():
    from tvm import arith

    analyzer = arith.Analyzer()
    n = tirx.Var("n", "int32")
    assert int(analyzer.simplify(n * 4 - n * 4 + 19)) == 19
    assert tvm.arith is tvm.sym


def test_tilelang_tvm_has_the_names_before_the_language_is_imported():
    code = (
        "import tilelang\n"
        "from tilelang import tvm\n"
        "from tvm import tirx\n"
        "import tvm.tirx.stmt_functor\n"
        "print(tirx.Call is tvm.ir.Call, hasattr(tvm, 'arith'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_tvm_modules_upstream_code_imports_right_after_import_tilelang():
    """``import tilelang`` then ``import tvm; from tvm import arith`` (upstream's tests do this
    before importing the language): the alias modules resolve, and ``import tilelang`` alone
    still imports no TVM."""
    code = (
        "import sys\n"
        "import tilelang\n"
        "print('tvm' in sys.modules)\n"
        "import tvm\n"
        "from tvm import arith\n"
        "import tvm.tirx.stmt_functor as functor\n"
        "print(arith.Analyzer is tvm.sym.Analyzer, callable(functor.post_order_visit))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "True"]
    plain = subprocess.run([sys.executable, "-c", "import tvm\nfrom tvm import arith"], capture_output=True, text=True,
                           timeout=120)
    assert plain.returncode != 0 and "arith" in plain.stderr  # without tilelang, TVM 0.27 has no tvm.arith


def test_install_adds_no_name_twice():
    from tilelang_core.language import tvm_names

    before = ir.Var.__dict__["dtype"]
    tvm_names._INSTALLED = False
    try:
        tvm_names.install()
    finally:
        tvm_names._INSTALLED = True
    assert ir.Var.__dict__["dtype"] is before  # the fallback is not wrapped a second time
    assert tilelang.tvm is tvm


def test_buffer_map_sends_each_tensor_parameter_to_its_buffer():
    @T.prim_func
    def gather(Table: T.Tensor([4], T.ptr), Out: T.Tensor([4, 8], T.float16), n: T.int32):
        with T.Kernel(1, threads=1):
            Out[0, 0] = T.float16(n)

    table, out, n = gather.params
    mapping = gather.buffer_map
    assert list(mapping) == [table, out] and mapping[out].same_as(out)
    assert mapping[table].dtype == "int64"  # a table of addresses is stored as int64
    assert [int(d) for d in mapping[out].shape] == [4, 8] and n not in mapping


def test_buffer_load_and_region_answer_isinstance_and_still_construct():
    """TVM 0.27's tirx.BufferLoad / BufferRegion are constructor functions: isinstance(x, tirx.BufferLoad),
    as upstream's access_ptr tests and passes write it, raised "isinstance() arg 2 must be a type"."""
    import tvm
    from tvm import tirx

    import tilelang.language  # noqa: F401 - installs the names

    buf = tirx.decl_buffer((8, 8), "float16", name="A")
    load = tirx.BufferLoad(buf, [tirx.IntImm("int32", 2), tirx.IntImm("int32", 3)])
    region = tirx.BufferRegion(buf, [tvm.ir.Range(0, 4), tvm.ir.Range(0, 8)])
    assert isinstance(load, tvm.ir.TensorLoad) and isinstance(region, tvm.ir.TensorRegion)
    assert isinstance(load, tirx.BufferLoad) and not isinstance(load, tirx.BufferRegion)
    assert isinstance(region, tirx.BufferRegion) and not isinstance(buf, tirx.BufferLoad)
    assert issubclass(tvm.ir.TensorLoad, tirx.BufferLoad)
