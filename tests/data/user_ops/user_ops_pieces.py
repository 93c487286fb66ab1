"""Python pieces for tests/data/user_ops/user_ops.yaml (imported by `op-plugin test --python`)."""
import op_plugin


@op_plugin.reference("npu_utest_scaled_add")
def scaled_add(x1, x2):
    return x1 + x2


@op_plugin.backward("npu_utest_scaled_add")
def scaled_add_backward(ctx, grad):
    return grad, grad


@op_plugin.reference("npu_utest_row_means")
def row_means(x):
    return x.mean(0)


@op_plugin.meta("npu_utest_row_means")
def row_means_meta(x):
    return x.new_empty(int(x.shape[1]))  # int() on a size: specialises under dynamic shapes
