"""tilelang_core.schema: the core's dataclasses validated by pydantic, from the stored snapshot or not."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from pydantic_core import ValidationError

from tilelang_core import schema
from tilelang_core.artifact import BuildOptions, KernelArtifact, TensorParam
from tilelang_core.cache.entry import EntryMeta
from tilelang_core.capabilities import Availability, BackendSpec

ARTIFACT = {
    "name": "vadd",
    "target": "c",
    "target_kind": "c",
    "params": [
        {"kind": "tensor", "name": "A", "dtype": "float32", "shape": ["n"], "device": "cpu"},
        {"kind": "scalar", "name": "s", "dtype": "int32"},
    ],
    "symbols": [{"name": "n", "param_index": 0, "dim": 0}],
    "device_kernels": [
        {
            "name": "vadd_kernel",
            "args": [{"name": "A", "kind": "pointer", "dtype": "float32", "param_index": 0}],
            "launch": {"grid": ["(n + 127) // 128", 1, 1], "block": [128, 1, 1]},
        }
    ],
}
SPEC = {
    "name": "mine",
    "distribution": "tilelang-backend-mine",
    "version": "1.0",
    "plugin_api_version": 1,
    "description": "Mine.",
    "targets": {"c": {"priority": 1, "consumes": ["device_source"], "native_compiler": {"program": "cc"}}},
}
META = {
    "format_version": 1,
    "kind": "export",
    "core_version": "0.1.0",
    "name": "vadd",
    "backend": {"name": "mine", "version": "1.0", "plugin_api_version": 1},
    "options": {"out_idx": [1]},
    "files": {"artifact.json": {"size": 3, "sha256": "a" * 64}},
    "created": 1.5,
}


def _with(base: dict, path: str, value) -> dict:
    """A deep copy of ``base`` with the dotted ``path`` set to ``value`` (``...`` deletes it)."""
    data = json.loads(json.dumps(base))
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


CASES = [
    (KernelArtifact, ARTIFACT),
    (KernelArtifact, _with(ARTIFACT, "params.0.colour", "red")),
    (KernelArtifact, _with(ARTIFACT, "params.0.shape", [1.5])),
    (KernelArtifact, _with(ARTIFACT, "symbols.0.param_index", -1)),
    (KernelArtifact, _with(ARTIFACT, "device_kernels.0.launch.grid", [1, 1])),
    (KernelArtifact, _with(ARTIFACT, "params.1.kind", "vector")),
    (KernelArtifact, _with(ARTIFACT, "name", ...)),
    (BuildOptions, {"out_idx": [0, 2], "compile_flags": ["-O3"], "pass_configs": {"tl.disable_vectorize": True}}),
    (BuildOptions, {"out_idx": ["first"]}),
    (EntryMeta, META),
    (EntryMeta, {**META, "files": {"artifact.json": None}}),
    (EntryMeta, _with(META, "kind", "backup")),
    (EntryMeta, {**META, "files": {"artifact.json": {"size": 3, "sha256": "XYZ"}}}),
    (EntryMeta, {**META, "files": {"artifact.json": {"size": -3, "sha256": "a" * 64}}}),
    (BackendSpec, SPEC),
    (BackendSpec, {**SPEC, "name": "Bad-Name"}),
    (BackendSpec, {**SPEC, "description": "two\nlines"}),
    (BackendSpec, {**SPEC, "targets": {"quantum": {"priority": 1, "consumes": ["device_source"]}}}),
    (BackendSpec, {**SPEC, "targets": {"c": {"priority": 1, "consumes": []}}}),
    (BackendSpec, {**SPEC, "plugin_api_version": 0}),
    (BackendSpec, _with(SPEC, "targets.c.dtypes", ["fp32", "float32"])),
    (Availability, {"available": False, "reason": "no driver"}),
    (Availability, {"available": "perhaps"}),
]


def _outcome(codec, cls, data):
    try:
        value = codec.validator.validate_python(data)
    except ValidationError as exc:
        return "error", [(e["type"], e["loc"], e["msg"]) for e in exc.errors(include_url=False)]
    return "ok", codec.serializer.to_json(value, indent=1).decode()


@pytest.mark.parametrize("cls, data", CASES, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(CASES)])
def test_snapshot_validates_exactly_as_pydantic_builds_it(cls, data):
    from_snapshot = schema._from_snapshot(cls)
    assert from_snapshot is not None, "no snapshot for this pydantic-core: run scripts/gen_docs.py"
    assert _outcome(from_snapshot, cls, data) == _outcome(schema._from_pydantic(cls), cls, data)


def test_valid_and_invalid_examples_above_really_differ():
    """The agreement test would pass vacuously if every case failed (or passed) the same way."""
    outcomes = [schema._from_snapshot(cls).validator.isinstance_python(data) for cls, data in CASES]
    assert outcomes.count(True) == 5 and outcomes.count(False) == len(CASES) - 5


def test_snapshot_file_is_current():
    assert schema.SNAPSHOT_PATH.read_text() == schema.snapshot_text(), (
        "tilelang_core/schema_snapshot.json is stale: run .venv/bin/python scripts/gen_docs.py"
    )


def test_root_types_validate_from_the_snapshot_in_this_environment():
    for name in schema.ROOT_TYPES:
        assert schema.codec_source(schema._resolve(name)) == "snapshot", name


def test_errors_name_the_field_and_what_was_given():
    with pytest.raises(ValidationError) as info:
        schema.validate_python(KernelArtifact, _with(ARTIFACT, "symbols.0.param_index", -1))
    assert schema.error_summary(info.value) == (
        "field 'symbols.0.param_index': Input should be greater than or equal to 0 (got -1)"
    )
    with pytest.raises(ValidationError) as info:
        schema.validate_python(BackendSpec, {**SPEC, "name": "Bad-Name"})
    assert "field 'name': must be a lowercase identifier" in schema.error_summary(info.value)
    with pytest.raises(ValidationError) as info:
        schema.validate_python(BackendSpec, _with(SPEC, "targets.c.dtypes", ["float32", "fp32", "float16x2"]))
    assert "field 'dtypes': unknown dtype name(s) ['fp32']; use TVM's names" in schema.error_summary(info.value)
    assert schema.validate_python(BackendSpec, _with(SPEC, "targets.c.dtypes", ["float16x2", "bool"])).targets["c"].dtypes


def test_json_round_trip_and_direct_construction_checks():
    art = schema.validate_python(KernelArtifact, ARTIFACT)
    assert isinstance(art.params[0], TensorParam) and art.params[0].shape == ["n"]
    assert schema.validate_json(KernelArtifact, art.to_json()) == art
    assert KernelArtifact.from_json(art.to_json()).replace(name="other").name == "other"
    with pytest.raises(ValueError, match="field 'targets': unknown target kind"):
        BackendSpec(**{**SPEC, "targets": {"quantum": {}}})
    with pytest.raises(TypeError):
        Availability(True)  # keyword-only, like the pydantic models they replace


def test_another_pydantic_core_version_falls_back_to_pydantic(monkeypatch):
    monkeypatch.setattr(schema, "_snapshot", {**schema._load_snapshot(), "pydantic_core": "0.0.0"})
    monkeypatch.setattr(schema, "_codecs", {})
    assert schema.validate_python(BuildOptions, {"out_idx": [1]}) == BuildOptions(out_idx=[1])
    assert schema.codec_source(BuildOptions) == "pydantic"


def test_a_missing_or_unreadable_snapshot_falls_back_to_pydantic(monkeypatch, tmp_path):
    broken = tmp_path / "schema_snapshot.json"
    broken.write_text("{not json")
    monkeypatch.setattr(schema, "SNAPSHOT_PATH", broken)
    monkeypatch.setattr(schema, "_snapshot", None)
    monkeypatch.setattr(schema, "_codecs", {})
    assert schema.validate_python(Availability, {"available": True}).available
    assert schema.codec_source(Availability) == "pydantic"


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["schemas"]["tilelang_core.capabilities:Availability"].update(fields=["available"]),
        lambda d: d["schemas"]["tilelang_core.capabilities:Availability"].update(cls={"$py": "tilelang_core.capabilities:Gone"}),
        lambda d: d["schemas"]["tilelang_core.capabilities:Availability"].update(type="no-such-schema-type"),
    ],
    ids=["field-list-differs-from-the-class", "class-is-gone", "layout-rejected-by-pydantic-core"],
)
def test_a_snapshot_that_does_not_fit_the_code_is_not_used(monkeypatch, damage):
    snap = json.loads(json.dumps(schema._load_snapshot()))
    damage(snap)
    monkeypatch.setattr(schema, "_snapshot", snap)
    monkeypatch.setattr(schema, "_codecs", {})
    assert schema._from_snapshot(Availability) is None
    assert schema.validate_python(Availability, {"available": True, "reason": ""}) == Availability.yes()
    assert schema.codec_source(Availability) == "pydantic"


def test_snapshot_refuses_what_cannot_be_stored():
    @dataclasses.dataclass
    class WithLambda:
        xs: list = dataclasses.field(default_factory=lambda: [1])

    from pydantic import TypeAdapter

    with pytest.raises(TypeError, match="lambda"):
        schema._encode(TypeAdapter(WithLambda).core_schema, "WithLambda")


def test_validating_from_the_snapshot_imports_no_pydantic_python_layer():
    code = (
        "import json, sys\n"
        "from tilelang_core import schema\n"
        "from tilelang_core.artifact import KernelArtifact\n"
        f"art = schema.validate_python(KernelArtifact, {ARTIFACT!r})\n"
        "print(json.dumps([art.name, sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic')]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["vadd", []]
