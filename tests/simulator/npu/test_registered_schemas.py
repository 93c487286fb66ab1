"""torch_npu's ops carry the schemas its library registers, not the codegen YAML's (npu/registered_schemas.py),
and the static-workspace forms TorchAir's aclgraph capture calls run eagerly: the workspace query and
npu_fused_infer_attention_score(.v2).out with `out=[attention_out, softmax_lse]`, as torch_npu's own docs call it.

Oracles: the library's bytes searched here with a plain regex (not the module's scan), the YAML's text, and a
float64 softmax(q k^T * scale) v written out in the test."""
from __future__ import annotations

import re

import pytest
import torch

from op_plugin._base.wheel import simulator_dir
from op_plugin._simulator.npu import wheel_meta

npu = torch.ops.npu
WHEEL = simulator_dir() / "torch_npu"
pytestmark = pytest.mark.usefixtures("torchair")


@pytest.fixture(scope="module")
def library_text() -> bytes:
    path = WHEEL / "lib/libtorch_npu.so"
    if not path.exists():
        pytest.skip("the unpacked wheel has no lib/libtorch_npu.so")
    return path.read_bytes()


def test_every_yaml_op_is_defined_with_the_librarys_schema(library_text):
    yaml_entries = dict(wheel_meta._all_schema_entries(str(WHEEL)))  # as the codegen YAML writes them
    assert set(yaml_entries) == set(wheel_meta.all_schema_entries(WHEEL))
    renamed = 0
    for name, entry in yaml_entries.items():
        base, _, overload = name.partition(".")
        op = getattr(getattr(npu, base), overload or "default", None)
        if op is None:  # a schema this torch refuses (docs/torch-npu-ops.md)
            continue
        found = re.search(rb"\0(" + re.escape(name.encode()) + rb"\([^\0]*\) -> [^\0]*)\0", library_text)
        assert found, name
        registered = torch._C.parse_schema("npu::" + found.group(1).decode())  # printed as torch prints defaults
        assert str(op._schema) == str(registered), name
        renamed += str(torch._C.parse_schema("npu::" + entry.schema)) != str(registered)
    assert renamed > 100  # 136 in torch-npu 2.13.0: `Tensor self` registered as `Tensor input`


def test_the_yaml_and_the_library_part_ways_where_an_ascend_caller_sees_it(library_text):
    yaml_text = (WHEEL / wheel_meta.CODEGEN_YAML).read_text()
    assert "func: npu_format_cast(Tensor self, int acl_format" in yaml_text
    assert re.search(rb"\0npu_format_cast\(Tensor input, int acl_format[^\0]*\0", library_text)
    x = torch.randn(2, 3)
    assert torch.equal(npu.npu_format_cast(input=x, acl_format=2), x)  # the keyword an NPU host takes
    assert "Tensor(a!) attention_out" in yaml_text
    assert re.search(rb"\0npu_fused_infer_attention_score\.out\([^\0]*Tensor\[\] out\) -> \(Tensor, Tensor\)\0",
                     library_text)


def _attention(q, k, v, scale):
    """[B, N, S, D] float64 softmax(q k^T * scale) v."""
    scores = torch.einsum("bnsd,bntd->bnst", q.double(), k.double()) * scale
    return torch.einsum("bnst,bntd->bnsd", torch.softmax(scores, dim=-1), v.double())


@pytest.mark.parametrize("version", [1, 2])
def test_static_workspace_forms_write_their_out_list(version):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, shape, 16, generator=g).to(torch.float16) for shape in (3, 7, 7))
    if version == 1:
        kwargs = {"num_heads": 4, "input_layout": "BNSD", "scale": 0.25}
        op, workspace_of = npu.npu_fused_infer_attention_score, npu._npu_fused_infer_attention_score_get_max_workspace
    else:
        kwargs = {"num_query_heads": 4, "input_layout": "BNSD", "softmax_scale": 0.25}
        op = npu.npu_fused_infer_attention_score_v2
        workspace_of = npu._npu_fused_infer_attention_score_v2_get_max_workspace
    workspace = workspace_of(q, k, v, **kwargs)
    assert workspace.dim() == 1 and workspace.dtype == q.dtype  # torch_npu: {size} elements of query's dtype
    attention_out, softmax_lse = torch.full_like(q, float("nan")), torch.empty(0, dtype=torch.float32)
    written = op.out(q, k, v, workspace=workspace, out=[attention_out, softmax_lse], **kwargs)
    assert written[0] is attention_out and written[1] is softmax_lse
    torch.testing.assert_close(attention_out.double(), _attention(q, k, v, 0.25), rtol=2e-3, atol=2e-3)
    with pytest.raises(ValueError, match=r"out's attention_out is torch.float16 \[2, 4, 3, 8\]"):
        op.out(q, k, v, workspace=workspace, out=[q.new_empty(2, 4, 3, 8), softmax_lse], **kwargs)
    with pytest.raises(ValueError, match="out must hold 2 tensors"):
        op.out(q, k, v, workspace=workspace, out=[attention_out], **kwargs)


def test_static_workspace_forms_have_no_meta_as_on_an_ascend_host():
    """torch_npu gives them none (neither in Python nor C++): TorchAir calls them only at capture, with real
    tensors; so are they left out of the ops tested in graph mode."""
    from op_plugin._simulator.npu import ops

    for name in ("npu_fused_infer_attention_score.out", "_npu_fused_infer_attention_score_get_max_workspace"):
        assert name in ops.EAGER_ONLY and name not in ops.COVERED
        op = ops.overload_of(name)
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta"), name


def test_the_schema_cache_is_trusted_only_when_this_user_wrote_it(tmp_path, monkeypatch):
    import json

    from op_plugin._simulator.npu import registered_schemas, wheel_cache

    monkeypatch.setattr(wheel_cache, "CACHE_DIR", str(tmp_path / "cache"))  # absolute: joins to itself
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    registered_schemas._schemas.cache_clear()
    try:
        scanned = registered_schemas.registered_schemas(WHEEL)
        (entry,) = (tmp_path / "cache").glob("schemas-*.bin")
        key = entry.stem.split("-", 1)[1]
        wrong = json.dumps([["npu_format_cast", "npu_format_cast(Tensor evil) -> Tensor"]]).encode()
        secret = wheel_cache.secret()
        for forged in (wheel_cache.MAGIC + wheel_cache.mac(b"k" * 32, key, wrong) + wrong,  # another key
                       wheel_cache.MAGIC + wheel_cache.mac(secret, key, b'{"a": 1}') + b'{"a": 1}'):  # malformed
            entry.write_bytes(forged)
            registered_schemas._schemas.cache_clear()
            assert registered_schemas.registered_schemas(WHEEL) == scanned
            assert entry.read_bytes() != forged  # rebuilt
    finally:
        registered_schemas._schemas.cache_clear()
