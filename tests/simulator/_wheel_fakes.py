"""A stand-in for an unpacked torch-npu wheel, shared by the installer's tests (tests/simulator/test_install*.py)."""
from op_plugin._base import wheel


def fake_unpack(folder, version=wheel.TORCH_NPU_VERSION):
    """The files a complete unpack of the pinned wheel has (contents do not matter here); `version` is the one its
    METADATA claims."""
    for name in wheel.REQUIRED_FILES:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# stand-in\n")
    dist_info = folder / f"torch_npu-{wheel.TORCH_NPU_VERSION}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch_npu\nVersion: {version}\n\nbody\n")
