"""Run a GE GraphDef on the CPU, node by node, checking every result against the graph.

``execute_graph(graph_def, inputs)`` walks the graph in topological order:

* ``Data``: the graph input at its ``index`` attr (checked against the Data desc);
* ``Const``: its ``value`` TensorDef decoded (dtype, shape, raw bytes);
* ``NetOutput``: its data inputs, in order, are the graph outputs;
* anything else: the kernel registered for its type (``op_plugin._simulator.interpreter.kernels``).

Inputs named ``"node:-1"`` are control edges (ordering only); ``""`` is an optional input
left unfed (the kernel gets ``None``). Output shapes come from the computed tensors, so
``-1`` dims and dynamic shapes need no shape inference.

TorchAir itself checks only the number of outputs, so every node output is checked here
against its output desc (dtype and shape; ``-1`` matches any size, ``[-2]`` any shape), against
the shape of the FX node TorchAir lowered it from where the lowering recorded one (``fx_shapes``),
and the graph outputs against the NetOutput descs and the ``_output_dtypes`` graph attr
(``checks`` says which declarations are trusted). The node checks run on the first call of each
input signature (dtypes, shapes, and the values of small integer inputs, which carry symbolic
sizes); later calls with that signature skip them, since every node's output dtype and shape is
then a function of the signature. Graphs where that is not so (a data-dependent op type, an FX
size no input binds, or no FX record at all) check every node on every call, as does every graph
when $OP_PLUGIN_CHECK_EVERY_CALL=1. Graph outputs are checked on every call. No graph output
shares memory with an input,
another output or a Const the plan keeps: GE gives each output its own buffer.

Collectives (HcomAllReduce & co., `..collectives`) run on every call, never folded; on every call each
one is preceded by the agreement of its group's ranks (`collectives.agree`; in the generated program
too, `program.py`), so a rank-divergent call fails naming the node instead
of hanging or aborting in gloo, also when only a later call's shapes differ between the ranks.

Why this module is over 400 lines: building a plan and running it share the node table and its checks;
what could stand alone already does (the straight-line program: program.py, what a plan keeps per
signature: verified.py, output checks: checks.py, folding: folding.py, FX shapes: fx_shapes.py).
"""

from __future__ import annotations

import collections
import contextlib
import os

import torch

from ...._ge.graph import ControlRef, parse_input, topological_order
from ...._ge.values import UnsupportedGeDtype, decode_attrs, decode_tensor_def, ge_dtype_to_torch
from ..kernels import lookup_kernel
from ..kernels.common import VIEWS_ALLOWED, remember_ints
from .. import collectives
from ..binding import as_outputs, bind
from ..prepared import spec_of
from . import donation, strided
from .checks import GeExecutionError, check_output, kernel_failure, output_check
from .folding import foldable_steps, is_ref_op, small_integer_data
from .program import build_program
from .fx_shapes import FxShapes, check_fx_shape
from .verified import SMALL_INT_INPUT, Verified, fresh_output, input_signature


class _Step:
    """One node, with everything that does not depend on the inputs worked out once: its decoded
    attrs, its kernel (or Const value), the dtype/shape each output must have, and where in the
    run's value list it reads its inputs and writes its outputs."""

    __slots__ = ("op", "inputs", "attrs", "kernel", "builtin", "const", "checks", "fx_shapes",
                 "arg_slots", "out_slots", "free_after", "folded", "collective", "writes_inputs", "kept_args",
                 "guard_every_call", "strided_args", "view_kernel", "strided_output")

    def __init__(self, op, inputs, attrs):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.kernel = None  # call(args) -> outputs: the node's kernel bound to it (binding.bind)
        self.builtin = False
        self.const = None
        self.checks = [output_check(desc, f"node {op.name!r} ({op.type}) output {i}", trust_float=False)
                       for i, desc in enumerate(op.output_desc)]
        self.fx_shapes = ()  # per output: the FX node's shape, or None where none was recorded
        self.arg_slots = ()  # per data input: its slot in the value list (_UNFED for an optional left out)
        self.out_slots = ()  # (output index, slot) for each output some node reads
        self.free_after = ()  # slots whose last reader is this node: dropped once it has run
        self.folded = False  # outputs fixed by the input signature: computed once per signature
        self.collective = op.type in collectives.GROUP_COLLECTIVES  # its group's ranks agree on it first
        self.writes_inputs = ()  # (output index, graph input index): a ref op writing a Data node's buffer
        self.kept_args = ()  # (data input index, what it is): inputs fed a value the plan keeps between calls
        self.guard_every_call = False  # a kernel not ours (a user's) reads kept values: checked on every call
        self.strided_args = frozenset()  # data inputs its built-in kernel may get as strided views (strided.py)
        self.view_kernel = None  # its kernel's strided-view form, if it has one
        self.strided_output = False  # runs `view_kernel`: its output is a strided view (strided.choose_views)


_UNFED = 0  # slot 0 always holds None
# GE types whose output shapes depend on input values, not only on input shapes.
DATA_DEPENDENT_TYPES = frozenset({"NonZero", "NonZeroWithValue", "Unique", "UniqueConsecutive", "UniqueWithCounts",
                                  "UniqueWithCountsAndSorting", "MaskedSelect", "MaskedSelectV2"})
_MAX_VERIFIED_SIGNATURES = 64
# Ref ops whose write of a graph input is the op's purpose even when the graph also returns the written
# value: TorchAir's converter of torch_npu's npu_kv_rmsnorm_rope_cache (v1) feeds it the caller's caches,
# which it updates in place on an NPU (eagerly and in graph mode) and returns as well.
IN_PLACE_TYPES = frozenset({"KvRmsNormRopeCache"})


class _DataInput:
    __slots__ = ("op", "index", "slot", "check", "scalar")

    def __init__(self, op, index, slot, check):
        self.op, self.index, self.slot, self.check = op, index, slot, check
        self.scalar = check is not None and check.shape == []


class GraphPlan:
    """A GraphDef prepared once and run many times.

    Preparing resolves everything a call would otherwise repeat: the node order, each node's kernel
    and decoded attrs, the checks each output must pass, and a slot in a flat value list for every
    tensor some node reads. A call then fills the Data slots, runs the kernel nodes in order (each
    reads and writes slots, and drops the values it was the last reader of), and collects the
    NetOutput slots. Checks made per call: every node output's dtype/shape against its desc and its
    FX node's shape, every graph input and output against its desc; none is skipped.
    """

    def __init__(self, graph_def, fx_meta=None):
        self.graph_def = graph_def
        self.name = graph_def.name
        self.steps = []
        self.outputs = None
        self.num_data = 0
        for op in topological_order(list(graph_def.op), GeExecutionError):
            refs = [parse_input(text) for text in op.input]
            data_refs = [ref for ref in refs if not isinstance(ref, ControlRef)]
            try:
                step = _Step(op, data_refs, decode_attrs(op))
                if op.type == "Const":
                    step.const = _kept(op)
            except UnsupportedGeDtype as error:  # a dtype in an attr or a Const: name the node
                message = str(error)
                if op.name not in message:
                    message = f"node {op.name!r} ({op.type}): {message}"
                raise GeExecutionError(message) from None
            self.steps.append(step)
            if op.type not in ("Const", "Data", "RefData", "NetOutput"):
                entry = _kernel_for(op)
                step.kernel = bind(entry, op, step.attrs)
                step.builtin = entry.builtin
                step.strided_args = strided.strided_positions(entry, step.kernel)
                step.view_kernel = strided.view_kernel(entry, op, step.attrs)
            if op.type == "NetOutput":
                if self.outputs is not None:
                    raise GeExecutionError(f"GE graph {self.name!r} has more than one NetOutput")
                self.outputs = op
                self._output_step = step
            elif op.type in ("Data", "RefData"):
                self.num_data += 1
        if self.outputs is None:
            raise GeExecutionError(f"GE graph {self.name!r} has no NetOutput node")
        self.fx = FxShapes(fx_meta, graph_def.op) if fx_meta is not None else None
        if self.fx is not None:
            for step in self.steps:
                if step.kernel is not None:
                    step.fx_shapes = tuple(self.fx.for_output(fx_meta, desc) for desc in step.op.output_desc)
        # GE gives every output its own buffer; the Consts live as long as the plan.
        self.kept_storages = {step.const.untyped_storage().data_ptr() for step in self.steps
                              if step.const is not None and step.const.numel() > 0}
        self._kept_ids = frozenset(id(step.const) for step in self.steps if step.const is not None)
        self.output_dtypes = (list(graph_def.attr["_output_dtypes"].list.i) if "_output_dtypes" in graph_def.attr
                              else None)
        self._assign_slots()
        self._prepare_outputs()
        # Signatures whose first call ran every node check; None: check every call.
        self._verified = None if self._check_every_call() else collections.OrderedDict()
        self._program = None  # the generated program of the latest signature verified (for inspection)

    def _check_every_call(self) -> bool:
        if os.environ.get("OP_PLUGIN_CHECK_EVERY_CALL") == "1" or self.fx is None:
            return True
        if any(step.op.type in DATA_DEPENDENT_TYPES for step in self.steps):
            return True
        bound = {binding.symbol for binding in self.fx.bindings}
        return any(not isinstance(dim, int) and not dim.free_symbols <= bound
                   for step in self._kernel_steps for fx in step.fx_shapes if fx is not None for dim in fx.dims)

    def _assign_slots(self) -> None:
        producers = {step.op.name: step for step in self.steps}
        slot_of: dict[tuple[str, int], int] = {}
        last_reader: dict[int, int] = {}
        for position, step in enumerate(self.steps):
            slots = []
            for ref in step.inputs:
                if ref is None:
                    slots.append(_UNFED)
                    continue
                producer = producers.get(ref.node)
                if producer is None or producer.op.type == "NetOutput" or (
                        producer.op.type in ("Data", "RefData", "Const") and ref.index != 0):
                    raise GeExecutionError(f"node {step.op.name!r} ({step.op.type}) reads {ref.node}:{ref.index}, "
                                           "which that node does not produce")
                slot = slot_of.setdefault((ref.node, ref.index), len(slot_of) + 1)
                slots.append(slot)
                last_reader[slot] = position
            step.arg_slots = tuple(slots)
        self._size = len(slot_of) + 1
        self._template: list = [None] * self._size
        self.data_inputs: list[_DataInput] = []
        small_data_slots: set[int] = set()
        outs_of: dict[str, list[tuple[int, int]]] = {}
        for (node, index), slot in slot_of.items():
            outs_of.setdefault(node, []).append((index, slot))
        for step in self.steps:
            op = step.op
            outs = sorted(outs_of.get(op.name, ()))
            step.out_slots = tuple(outs)
            if op.type == "Const" and outs:
                self._template[outs[0][1]] = step.const
                remember_ints(step.const)
            elif op.type in ("Data", "RefData"):
                index = step.attrs.get("index")
                if index is None or not 0 <= index < self.num_data:
                    raise GeExecutionError(f"Data node {op.name!r} has index {index!r}; the graph has "
                                           f"{self.num_data} Data nodes")
                desc = op.output_desc[0] if len(op.output_desc) else (op.input_desc[0] if len(op.input_desc) else None)
                check = None if desc is None else output_check(desc, f"graph input {index} (Data node {op.name!r})",
                                                               trust_float=True)
                self.data_inputs.append(_DataInput(op, index, outs[0][1] if outs else None, check))
                if outs and small_integer_data(desc, SMALL_INT_INPUT):
                    small_data_slots.add(outs[0][1])
        freed: dict[int, list[int]] = {}
        for slot, position in last_reader.items():
            if self.steps[position].op.type != "NetOutput":
                freed.setdefault(position, []).append(slot)
        for position, slots in freed.items():
            self.steps[position].free_after = tuple(slots)
        self._kernel_steps = [step for step in self.steps if step.kernel is not None]
        for position in foldable_steps(self.steps, small_data_slots):
            self.steps[position].folded = True
        # Slots whose values the signature fixes: Consts, small integer inputs, folded nodes' outputs.
        self._fixed_slots = small_data_slots | {slot for step in self.steps if step.const is not None or step.folded
                                                for _, slot in step.out_slots}
        self.unfolded_steps = [step for step in self._kernel_steps if not step.folded]
        self._views_allowed = not any(is_ref_op(step.op) for step in self._kernel_steps)
        self._find_kept_args()
        self._find_input_writes()
        for step in strided.choose_views(self.steps, self._views_allowed):
            step.kernel, step.strided_output = step.view_kernel, True
        self.strided_views = tuple(step.op.name for step in self._kernel_steps if step.strided_output)

    def _find_kept_args(self) -> None:
        """The inputs of each kernel node that the plan feeds a value it keeps between calls: a Const, or
        a folded node's output (kept per signature). No kernel may write one (GE's constants are read-only):
        a write would change every later call (`_check_kept`)."""
        kept = {}
        for step in self.steps:
            for _, slot in step.out_slots:
                if step.const is not None:
                    kept[slot] = f"the value of Const node {step.op.name!r}"
                elif step.folded:
                    kept[slot] = (f"the output of node {step.op.name!r} ({step.op.type}), which the plan computes "
                                  "once per input signature")
        for step in self._kernel_steps:
            step.kept_args = tuple((index, kept[slot]) for index, slot in enumerate(step.arg_slots) if slot in kept)
            # built-in kernels are checked on a signature's first call; a user's kernel on every call
            step.guard_every_call = bool(step.kept_args) and not step.builtin

    def _find_input_writes(self) -> None:
        """A ref op (an output named like an input: ScatterNdUpdate's var, Assign's ref) fed straight
        by a Data node writes that graph input's buffer on an NPU: GE runs TorchAir's in-place
        converters (npu_scatter_nd_update_ after its re-inplace pass) on the caller's tensor, with no
        graph output for the write. The executor copies the op's output back into the caller's
        tensor when the op runs, so later readers and the caller see the write (when it has the
        input's shape and dtype; a reshaping Assign reaches only the graph's readers)."""
        data_index = {step.op.name: step.attrs.get("index") for step in self.steps
                      if step.op.type in ("Data", "RefData")}
        # A write the graph also returns is a functional op lowered onto a ref op (as_strided_scatter
        # as ViewCopy on its input): its result reaches the caller as an output and eager leaves the
        # input alone, so the caller's tensor is not written.
        # Except for the ref ops whose in-place write is the op itself (IN_PLACE_TYPES): the caller's
        # tensor is written whether or not the graph also returns it.
        returned = {(ref.node, ref.index) for ref in self._output_step.inputs if ref is not None}
        for step in self._kernel_steps:
            if not is_ref_op(step.op):
                continue
            names = [desc.name for desc in step.op.input_desc]
            writes = []
            for out_index, desc in enumerate(step.op.output_desc):
                if desc.name and desc.name in names:
                    position = names.index(desc.name)
                    ref = step.inputs[position] if position < len(step.inputs) else None
                    if ref is not None and ref.index == 0 and ref.node in data_index \
                            and ((step.op.name, out_index) not in returned or step.op.type in IN_PLACE_TYPES):
                        writes.append((out_index, data_index[ref.node]))
            step.writes_inputs = tuple(writes)

    def _check_kept(self, step, kept: list, versions: list, failed: bool = False) -> None:
        """After `step`'s kernel ran on `kept` (the values it read that the plan keeps, with their version
        counters before the call): a write into one restores the plan's constants and is an error naming the
        node and the input; if the kernel `failed` anyway, its own error goes on (the constants restored)."""
        for (index, what), value, version in zip(step.kept_args, kept, versions, strict=True):
            if _version(value) != version:
                self._restore_constants()
                if failed:
                    return  # the kernel raised (a reference kernel names its own write): that error goes on
                op = step.op
                name = op.input_desc[index].name if index < len(op.input_desc) else ""
                raise GeExecutionError(
                    f"node {op.name!r} ({op.type}) wrote into its input {index}{f' ({name!r})' if name else ''}, "
                    f"{what}: the plan keeps that value for later calls, and a GE constant is read-only. A kernel "
                    "may write only a ref input (an input its prototype names as an output too); for a YAML op, "
                    "declare the write in the schema (`Tensor(a!)`) or write into a copy. The plan's constants "
                    "are restored")

    def guarded(self, step, call, kept: list):
        """`call` (a node's prepared call in a generated program) checked for writes into `kept`, the values
        the plan feeds it and keeps between calls (see `_check_kept`)."""
        check = self._check_kept

        def guarded_call(*args):
            versions = [_version(value) for value in kept]
            try:
                result = call(*args)
            except BaseException:
                check(step, kept, versions, failed=True)
                raise
            check(step, kept, versions)
            return result

        return guarded_call

    def _restore_constants(self) -> None:
        """Every Const decoded again from the graph and every signature's folded values dropped (they are
        computed again on the signature's next call): a value the plan keeps was written."""
        for step in self.steps:
            if step.const is not None:
                step.const = _kept(step.op)
                remember_ints(step.const)
                for _, slot in step.out_slots[:1]:
                    self._template[slot] = step.const
        self.kept_storages = {step.const.untyped_storage().data_ptr() for step in self.steps
                              if step.const is not None and step.const.numel() > 0}
        self._kept_ids = frozenset(id(step.const) for step in self.steps if step.const is not None)
        if self._verified is not None:
            self._verified.clear()
        self._program = None

    @staticmethod
    def write_inputs(step, outputs, inputs) -> None:
        """What a ref op that writes graph inputs (`writes_inputs`) does to the caller's tensors."""
        for out_index, input_index in step.writes_inputs:
            target, value = inputs[input_index], outputs[out_index]
            if not isinstance(target, torch.Tensor) or target.shape != value.shape or target.dtype != value.dtype:
                continue  # a write that reshapes the variable (Assign with validate_shape=False): a caller's torch
                # tensor cannot change shape, so only the graph's readers see the new value
            if target.data_ptr() != value.data_ptr():
                if torch._debug_has_internal_overlap(target) == 1:  # an expanded (stride-0) feed: copy_ refuses
                    raise GeExecutionError(
                        f"node {step.op.name!r} ({step.op.type}) writes its output {out_index} into graph input "
                        f"{input_index}, whose elements share memory (an expanded or stride-0 tensor); feed a "
                        "tensor with its own storage (.clone())")
                target.copy_(value)

    @property
    def output_slots(self) -> tuple:
        """The slots NetOutput reads, in output order."""
        return self._output_step.arg_slots

    def fixed_values(self, folded_values: dict) -> dict:
        """slot -> value for every value a signature fixes: the Consts and `folded_values`."""
        fixed = {slot: value for slot, value in enumerate(self._template) if value is not None}
        fixed.update(folded_values)
        return fixed

    def _prepare_outputs(self) -> None:
        op = self._output_step.op
        self._output_checks = []
        # Outputs whose buffer the storage use count may vouch for (verified.fresh_output): a graph input, a
        # Const, or a built-in kernel's result. A user's kernel might alias an input through a storage of its
        # own (torch.from_numpy(x.numpy())): its outputs are compared with every input's storage.
        producer = {slot: step for step in self.steps for _, slot in step.out_slots}
        self._trusted_outputs = tuple(slot in producer and (producer[slot].builtin or producer[slot].kernel is None)
                                      for slot in self._output_step.arg_slots)
        for index, ref in enumerate(self._output_step.inputs):
            if ref is None:
                raise GeExecutionError(f"GE graph {self.name!r}: NetOutput input {index} is empty")
            where = f"graph {self.name!r} output {index} (from {ref.node}:{ref.index})"
            check = output_check(op.input_desc[index], where, trust_float=True) if index < len(op.input_desc) else None
            expected = None
            if self.output_dtypes is not None and index < len(self.output_dtypes):
                expected = ge_dtype_to_torch(self.output_dtypes[index], where=f"{where}: ")
            self._output_checks.append((where, check, expected))
        if self.output_dtypes is not None and len(self.output_dtypes) != len(self._output_checks):
            raise GeExecutionError(f"graph {self.name!r}: NetOutput has {len(self._output_checks)} inputs but "
                                   f"_output_dtypes lists {len(self.output_dtypes)}")

    def run(self, inputs: list) -> list:
        if len(inputs) != self.num_data:
            raise GeExecutionError(f"GE graph {self.name!r} has {self.num_data} Data nodes "
                                   f"but got {len(inputs)} inputs")
        verified_calls = self._verified
        signature = input_signature(inputs) if verified_calls is not None and not _observers else None
        token = VIEWS_ALLOWED.set(self._views_allowed)
        try:
            if signature is not None:
                verified = verified_calls.get(signature)
                if verified is not None:  # its first call passed every check: the generated program
                    verified_calls.move_to_end(signature)
                    return self._collect_outputs(verified.program(inputs), inputs, verified.storages, verified.ids,
                                                 verified.outputs)
            return self._run_first(inputs, signature)
        finally:
            VIEWS_ALLOWED.reset(token)

    def _run_first(self, inputs: list, signature) -> list:
        """A call that checks every node: each call where the plan checks every call, else the first
        call of each signature, which then gets its program: the calls its nodes were prepared with on
        this call, strung together."""
        values = self._template.copy()
        self._data_value(inputs, values)
        folded_values, calls = {}, {}
        donors = {} if signature is not None else None  # only a signature's program writes into operands
        self._run_checked(values, inputs, folded_values, calls, donors)
        outs = [values[slot] for slot in self._output_step.arg_slots]
        if signature is None:
            return self._collect_outputs(outs, inputs)
        storages = {_storage(v) for v in folded_values.values() if isinstance(v, torch.Tensor) and v.numel() > 0}
        ids = frozenset(id(v) for v in folded_values.values())
        self._program = build_program(self, inputs, folded_values, calls, donation.choose(self, calls, donors))
        outputs = self._collect_outputs(outs, inputs, storages, ids)
        self._verified[signature] = Verified(self._program, storages, ids, folded_values, calls,
                                             tuple((t.dtype, t.shape) for t in outputs))
        if len(self._verified) > _MAX_VERIFIED_SIGNATURES:
            self._verified.popitem(last=False)
        return outputs

    def _run_checked(self, values: list, inputs: list, folded_values: dict, calls: dict, donors: dict | None) -> None:
        """Every kernel, every node check; the outputs of folded nodes go to `folded_values`, the
        call each node was prepared with (for the specs of this call's inputs) to `calls`, and the operands
        that could hold a node's output to `donors` (`donation.candidates`; None: not looked for)."""
        resolver = self.fx.resolver(inputs) if self.fx is not None else None
        observer = _observers[-1] if _observers else None
        fixed = self._fixed_slots
        input_storages = None  # the graph inputs' storages, once a folded node needs them
        for step in self._kernel_steps:
            args = [values[slot] for slot in step.arg_slots]
            if step.collective:
                collectives.agree(step.op, step.attrs, args)
            specs = [spec_of(arg, slot in fixed) for arg, slot in zip(args, step.arg_slots, strict=True)]
            if step.kept_args:
                kept = [args[index] for index, _ in step.kept_args]
                versions = [_version(value) for value in kept]
                try:
                    call, outputs = _run_kernel(step, args, specs, resolver)
                except BaseException:
                    self._check_kept(step, kept, versions, failed=True)
                    raise
                self._check_kept(step, kept, versions)
            else:
                call, outputs = _run_kernel(step, args, specs, resolver)
            calls[step] = call
            if donors is not None:
                found = donation.candidates(call, args, outputs)
                if found:
                    donors[step] = found
            if step.strided_args and not step.strided_output:
                strided.check_dense(step, args, outputs)
            if step.writes_inputs:
                self.write_inputs(step, outputs, inputs)
            for index, slot in step.out_slots:
                if index >= len(outputs):
                    raise GeExecutionError(f"a node reads {step.op.name}:{index}, which that node does not produce "
                                           f"(its kernel returned {len(outputs)} outputs)")
                value = outputs[index]
                if step.folded:
                    if input_storages is None:
                        input_storages = {_storage(t) for t in inputs if isinstance(t, torch.Tensor) and t.numel()}
                    if isinstance(value, torch.Tensor) and (value.is_inference() or (
                            value.numel() and _storage(value) in input_storages)):
                        # an Identity or Reshape of a small integer input returns the caller's tensor (or a view):
                        # kept for the signature's later calls, it would follow what the caller writes into it.
                        # And a value kept between calls has a version counter (`_check_kept`), which a tensor
                        # made under torch.inference_mode lacks.
                        with torch.inference_mode(False):
                            value = value.clone()
                    folded_values[slot] = value
                    remember_ints(value)
                values[slot] = value
            for slot in step.free_after:
                values[slot] = None
            if observer is not None:  # what a tool sees of a node is dense, as on an NPU
                observer(self, step.op, [t.contiguous() for t in outputs] if step.strided_output else outputs)

    def _data_value(self, inputs: list, values: list) -> None:
        """Fill the Data slots from the graph inputs, each checked against its Data desc."""
        for data in self.data_inputs:
            tensor = inputs[data.index]
            if not isinstance(tensor, torch.Tensor):
                tensor = torch.tensor(tensor)  # a Python scalar for a symbolic size
            elif data.scalar and tensor.shape == (1,):
                # TorchAir's generated input code feeds a SymInt as `numpy.array([v])` to a Data
                # declared as a scalar (its `_ValueInput.__call__` gives the 0-d value): same value.
                tensor = tensor.reshape(())
            if data.check is not None:
                check_output(tensor, data.check)
            if data.slot is not None:
                values[data.slot] = tensor

    def _collect_outputs(self, outs: list, inputs: list, cached_storages: set = frozenset(),
                         cached_ids: frozenset = frozenset(), proven: tuple = ()) -> list:
        """The graph outputs, each in a buffer of its own and checked against the graph; `proven`: the
        (dtype, shape) of each output on the signature's first call, which passed the full checks: an output
        equal to it passes them too, anything else is checked in full."""
        outputs = []
        seen_storages = None  # built only when an output's buffer may be shared (verified.fresh_output)
        kept_ids = self._kept_ids | cached_ids if cached_ids else self._kept_ids
        for position, (value, trusted, (where, check, expected)) in enumerate(
                zip(outs, self._trusted_outputs, self._output_checks, strict=True)):
            tensor = value.contiguous()
            # GE writes every output into its own buffer: never hand back an alias of an input,
            # another output, a Const the plan keeps or a value it caches for a signature.
            if seen_storages is None and tensor.numel() > 0 and not (
                    (trusted or tensor is not value) and fresh_output(tensor, inputs, outputs, kept_ids)):
                seen_storages = {_storage(t) for t in inputs if isinstance(t, torch.Tensor)}
                seen_storages |= self.kept_storages | cached_storages | {_storage(t) for t in outputs}
            if seen_storages is not None:
                if tensor.numel() > 0 and _storage(tensor) in seen_storages:
                    tensor = tensor.clone()
                seen_storages.add(_storage(tensor))
            if not proven or tensor.dtype is not proven[position][0] or tensor.shape != proven[position][1]:
                if check is not None:
                    check_output(tensor, check)
                if expected is not None and tensor.dtype != expected:
                    raise GeExecutionError(f"{where}: dtype mismatch, graph attr _output_dtypes expects {expected}, "
                                           f"got {tensor.dtype}")
            outputs.append(tensor)
        return outputs


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def _kept(const_op) -> torch.Tensor:
    """A Const node's value, as the plan keeps it between calls: with a version counter (`_check_kept`),
    also when the plan is built under torch.inference_mode."""
    with torch.inference_mode(False):
        return decode_tensor_def(const_op.attr["value"].t, where=f"Const node {const_op.name!r}: ")


def _version(tensor) -> int | None:
    """The version counter of a value the plan keeps (None for a tensor without one: made under inference mode)."""
    return None if not isinstance(tensor, torch.Tensor) or tensor.is_inference() else tensor._version


def _kernel_for(op):
    entry = lookup_kernel(op.type)
    if entry is None:
        raise GeExecutionError(
            f"GE op type {op.type!r} (node {op.name!r}) has no CPU kernel in the op_plugin simulator. "
            f"Add one with op_plugin.register_ge_kernel({op.type!r}, fn), where fn takes the "
            "node's inputs by position and its attrs as keyword arguments and returns its output tensor(s) "
            "(docs/contributing.md)"
        )
    return entry


def _run_kernel(step: _Step, args: list, specs: list, resolver=None) -> tuple:
    """(the call prepared for `specs`, its outputs on `args`), every output checked."""
    op = step.op
    kernel = step.kernel
    try:
        call = kernel.call_for(kernel.grouped(specs))
        outputs = as_outputs(call(*kernel.grouped(args)), kernel.where)
    except GeExecutionError:
        raise
    except Exception as error:  # name the node: a bare torch error says nothing about the graph
        raise kernel_failure(op, error) from error
    if step.checks and len(outputs) != len(step.checks):
        raise GeExecutionError(
            f"node {op.name!r} ({op.type}): the graph declares {len(step.checks)} outputs, "
            f"the kernel returned {len(outputs)}"
        )
    for index, tensor in enumerate(outputs):
        if not isinstance(tensor, torch.Tensor):
            raise GeExecutionError(f"node {op.name!r} ({op.type}) output {index}: the kernel returned "
                                   f"{type(tensor).__name__}, not a tensor")
        if index < len(step.checks):
            check_output(tensor, step.checks[index])
        fx = step.fx_shapes[index] if index < len(step.fx_shapes) else None
        if fx is not None and resolver is not None:
            check_fx_shape(tensor, resolver.expected(fx), fx, step.checks[index].where)
    return call, outputs


# Who sees every node's outputs as graphs run (innermost last); see `observing`.
_observers: list = []


@contextlib.contextmanager
def observing(observer):
    """Within the block, every graph run calls `observer(plan, op, outputs)` after each kernel node,
    with the node's output tensors (not copies: an observer that keeps them must clone them, since a
    later ref op may write into them). For per-node accuracy tools; costs nothing when unused."""
    _observers.append(observer)
    try:
        yield observer
    finally:
        _observers.remove(observer)


def compile_graph(graph_def, fx_meta=None) -> GraphPlan:
    """Prepare a GraphDef for repeated runs (topological order, decoded attrs); `fx_meta` is what
    the lowering recorded of the FX graph (`op_plugin._simulator.hosting.fx_meta.FxMetaRecord`), if any."""
    return GraphPlan(graph_def, fx_meta)


def execute_graph(graph_def, inputs: list) -> list:
    """Run ``graph_def`` on the CPU with ``inputs`` in Data-index order; one tensor per NetOutput input."""
    return GraphPlan(graph_def).run(list(inputs))
