"""attention_worker_scheduler(_) and ffn_worker_scheduler(_) (issue 23): refused by name in eager and in
GE mode, saying why (the schedule context points at device memory written by peer devices; CANN's
kernels dereference it and wait on it), after the argument check the ops document (int8, 1024 bytes)."""
import pytest
import torch

from op_plugin._testing_harness import run_node

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


@pytest.mark.parametrize("op", ("attention_worker_scheduler", "attention_worker_scheduler_", "ffn_worker_scheduler",
                                "ffn_worker_scheduler_"))
def test_eager_refuses_by_name_with_the_reason(op):
    with pytest.raises(NotImplementedError, match=f"npu::{op}: .* is not simulated: .*device addresses.*peer devices"):
        getattr(npu, op)(torch.zeros(1024, dtype=torch.int8))
    with pytest.raises(ValueError, match=f"npu::{op}: schedule_context must be a 1-D int8 tensor of 1024 bytes"):
        getattr(npu, op)(torch.zeros(512, dtype=torch.int8))


@pytest.mark.parametrize("ge_type, attrs", (("AttentionWorkerScheduler", {}),
                                            ("FfnWorkerScheduler", {"sync_group_size": 2})))
def test_ge_kernels_refuse_naming_the_node(ge_type, attrs):
    with pytest.raises(Exception, match="not simulated.*peer devices") as error:
        run_node(ge_type, [torch.zeros(1024, dtype=torch.int8)], [(torch.int8, [1024])], name="afd_poll", **attrs)
    assert "afd_poll" in str(error.value)
