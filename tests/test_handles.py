"""RegistrationHandle / HandleGroup (op_plugin/_base/handles.py): HandleGroup as a rollback context."""
import pytest

from op_plugin._base.handles import HandleGroup, RegistrationHandle


def _recording(log, name):
    return RegistrationHandle(lambda: log.append(name), name)


def test_a_block_that_raises_takes_back_what_it_added_newest_first():
    log = []
    with pytest.raises(RuntimeError, match="third failed"), HandleGroup("probe") as group:
        group.add(_recording(log, "first"))
        group.add(_recording(log, "second"))
        raise RuntimeError("third failed")
    assert log == ["second", "first"] and group.destroyed


def test_a_block_that_succeeds_keeps_what_it_added():
    log = []
    with HandleGroup("probe") as group:
        first = group.add(_recording(log, "first"))
    assert log == [] and not group.destroyed and not first.destroyed and len(group) == 1
    group.destroy()
    assert log == ["first"]


def test_a_base_exception_rolls_back_too():
    log = []
    with pytest.raises(KeyboardInterrupt), HandleGroup("probe") as group:
        group.add(_recording(log, "first"))
        raise KeyboardInterrupt
    assert log == ["first"]


def test_a_failing_rollback_raises_with_the_blocks_error_as_its_context():
    log = []

    def boom():
        raise ValueError("take-back failed")

    with pytest.raises(ValueError, match="take-back failed") as info:
        with HandleGroup("probe") as group:
            group.add(_recording(log, "first"))
            group.add(RegistrationHandle(boom, "boom"))
            raise RuntimeError("block failed")
    assert log == ["first"]  # every member is still destroyed
    assert isinstance(info.value.__context__, RuntimeError)


def test_nested_groups_roll_back_as_one():
    log = []
    with pytest.raises(RuntimeError), HandleGroup("outer") as outer:
        outer.add(_recording(log, "outer member"))
        with HandleGroup("inner") as inner:
            inner.add(_recording(log, "inner member"))
        outer.add(inner)
        raise RuntimeError("later step failed")
    assert log == ["inner member", "outer member"]
