"""Scalars of a kernel keep their own name in C and CUDA source.

TVM 0.27's C and CUDA code generators name the storage of every buffer ``<name>_ptr``, so
``x = T.alloc_var(T.float32)`` printed as ``float x_ptr[1]; x_ptr[0] = ...``. A one-element
array (``T.alloc_var``, ``T.alloc_local((1,), ...)``) is printed under the kernel's name instead:
``float x[1]; x[0] = ...``, which is what a reader looks for (and what TileLang's sources show).

The rename is textual and only ever applied where it cannot change the program: the new name
must not be an identifier anywhere in the source other than a member name after ``.``/``->`` (a variable, a function, a type, a macro of the
generated prelude, a word in a comment), a C/C++ keyword, a name reserved to the implementation
(leading underscore), an all-capitals name (macro style) or one of the lower-case macros and
objects of the C/CUDA headers the sources include. Everything else keeps TVM's ``_ptr`` name.
"""

from __future__ import annotations

import re

#: A declaration of a one-element array: ``float x_ptr[1];``, ``alignas(64) half x_ptr[1];``,
#: ``__shared__ alignas(64) float x_ptr[1];``.
_ONE_ELEMENT_DECL = re.compile(
    r"^[ \t]*(?:__shared__[ \t]+)?(?:alignas\(\d+\)[ \t]+)?(?:[A-Za-z_]\w*[ \t]+)+([A-Za-z]\w*?_ptr(?:_\d+)?)\[1\];[ \t]*$",
    re.M,
)
#: ``x_ptr`` -> ``x``; ``x_ptr_1`` (TVM's second ``x``) -> ``x_1``.
_UNSUFFIXED = re.compile(r"^(\w+?)_ptr(_\d+)?$")
#: Identifiers, except member names after ``.`` / ``->`` (``threadIdx.x`` does not take ``x``).
_IDENTIFIER = re.compile(r"(?<![\w.])(?<!->)[A-Za-z_]\w*")

#: C11 and C++17 keywords, C++'s alternative operator spellings, and lower-case macros or
#: objects of the headers a generated source includes (stdbool, math, errno, stdio, CUDA).
_NOT_A_NAME = frozenset(
    """
    auto break case char const continue default do double else enum extern float for goto if inline
    int long register restrict return short signed sizeof static struct switch typedef union unsigned
    void volatile while alignas alignof asm bool catch class char8_t char16_t char32_t concept
    const_cast consteval constexpr constinit co_await co_return co_yield decltype delete dynamic_cast
    explicit export false friend mutable namespace new noexcept nullptr operator private protected
    public reinterpret_cast requires static_assert static_cast template this thread_local throw true
    try typeid typename using virtual wchar_t and and_eq bitand bitor compl not not_eq or or_eq xor
    xor_eq noreturn complex imaginary errno math_errhandling stdin stdout stderr offsetof assert
    uint uchar ushort half warpSize threadIdx blockIdx blockDim gridDim
    """.split()
)


def _renamable(name: str, identifiers: set[str]) -> bool:
    return (
        name not in identifiers
        and name not in _NOT_A_NAME
        and not name.startswith("_")
        and not re.fullmatch(r"[A-Z][A-Z0-9_]*", name)
    )


def scalars_by_kernel_name(source: str) -> str:
    """``source`` with each one-element array ``<name>_ptr`` renamed ``<name>`` (and TVM's
    ``<name>_ptr_<k>`` of a second ``<name>``, ``<name>_<k>``) where that is safe.

    See the module docstring for when a name is kept. The result compiles exactly as ``source``
    does: the rename is a consistent one-to-one change of identifiers that did not exist before.
    """
    declared = set(_ONE_ELEMENT_DECL.findall(source))
    if not declared:
        return source
    identifiers = set(_IDENTIFIER.findall(source))
    renames = {old: _UNSUFFIXED.sub(r"\1\2", old) for old in declared}
    wanted = list(renames.values())
    renames = {old: new for old, new in renames.items()
               if wanted.count(new) == 1 and _renamable(new, identifiers)}  # x_ptr_1 and x_1_ptr: neither
    if not renames:
        return source
    pattern = re.compile(r"\b(" + "|".join(re.escape(old) for old in sorted(renames)) + r")\b")
    return pattern.sub(lambda m: renames[m.group(1)], source)
