"""Tests of kernels/image/sampling.py: ResizeNearestNeighborV2(Grad), GridSampler2D/3D, GridSampler2DGrad.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_plugin._testing_harness import check_compiled, Const, run_node

from tests.simulator.kernels.helpers import aten, check_grad_case, F16, F32, I32


# ---- resampling ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,size,dtype", [((2, 3, 4, 4), [8, 8], F32), ((1, 2, 5, 3), [7, 4], F16),
                                              ((1, 1, 6, 6), [4, 3], F32), ((1, 2, 3, 3), [3, 3], I32)])
def test_resize_nearest_neighbor_v2(shape, size, dtype):
    x = (torch.randn(shape) * 10).to(dtype)
    check_compiled(lambda x: aten.upsample_nearest2d(x, size), (x,), "ResizeNearestNeighborV2", kind="kernel",
                   oracle=lambda x: aten.upsample_nearest2d(x.double(), size).to(dtype))  # no int kernel on CPU


@pytest.mark.parametrize("align_corners,half_pixel", [(False, True), (True, False)])
@pytest.mark.parametrize("size", [[7, 3], [2, 9]])
def test_resize_nearest_neighbor_v2_attrs_hand_built(align_corners, half_pixel, size):
    """half_pixel_centers is torch's nearest-exact; align_corners rounds onto the corner-aligned grid."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 5)
    if half_pixel:
        want = F.interpolate(x, size=size, mode="nearest-exact")
    else:
        rows = [int((i * (4 - 1) / max(size[0] - 1, 1)) + 0.5) for i in range(size[0])]
        cols = [int((j * (5 - 1) / max(size[1] - 1, 1)) + 0.5) for j in range(size[1])]
        want = x[:, :, rows][:, :, :, cols]
    graph_x = x.permute(0, 2, 3, 1).contiguous()  # ND layout: the op's own NHWC
    (got,) = run_node("ResizeNearestNeighborV2", [graph_x, Const(torch.tensor(size, dtype=I32))],
                      [(F32, [1, *size, 2])], align_corners=align_corners, half_pixel_centers=half_pixel)
    torch.testing.assert_close(got, want.permute(0, 2, 3, 1))


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding_mode", [0, 1, 2])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_2d(mode, padding_mode, align_corners):
    torch.manual_seed(0)
    x, grid = torch.randn(2, 3, 5, 4), torch.rand(2, 3, 6, 2) * 2.4 - 1.2
    check_compiled(lambda x, g: aten.grid_sampler_2d(x, g, mode, padding_mode, align_corners), (x, grid),
                   "GridSampler2D", kind="accumulated")


@pytest.mark.parametrize("mode,padding_mode,align_corners", [(0, 0, False), (1, 1, True), (0, 2, True)])
@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
def test_grid_sampler_3d(mode, padding_mode, align_corners, dtype):
    torch.manual_seed(0)
    x, grid = torch.randn(1, 2, 3, 4, 5).to(dtype), (torch.rand(1, 2, 3, 2, 3) * 2.2 - 1.1).to(dtype)

    def fn(x, g):
        return aten.grid_sampler_3d(x, g, mode, padding_mode, align_corners)

    check_compiled(fn, (x, grid), "GridSampler3D", oracle=lambda x, g: fn(x.float(), g.float()).to(dtype),
                   kind="accumulated" if dtype == F32 else "kernel")


@pytest.mark.parametrize("mode", [0, 1], ids=["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_2d_backward(mode, padding_mode, align_corners):
    torch.manual_seed(0)
    x, grid = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 3, 2) * 2.4 - 1.2
    g = torch.randn(2, 3, 4, 3)

    def fn(g, x, grid):
        return aten.grid_sampler_2d_backward(g, x, grid, mode, padding_mode, align_corners, [True, True])

    check_grad_case(fn, (g, x, grid), "GridSampler2DGrad", scale=4.0)
