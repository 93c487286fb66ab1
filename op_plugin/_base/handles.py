"""One handle type for everything op_plugin registers and can take back.

The pattern of torch's `torch._library.utils.RegistrationHandle`: whoever registers something
returns a handle whose `destroy()` undoes exactly that registration. Handles are idempotent (a
second `destroy()` does nothing) and compose: a `HandleGroup` destroys its members in reverse
order, which is how a failed load or an unload takes back everything done for an op.

A `HandleGroup` is also a rollback context, with the semantics of `contextlib.ExitStack` used
as one: `with HandleGroup("...") as group: group.add(...)` destroys every handle added in the
block if the block raises (any exception, which then propagates), and keeps them all otherwise.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Self


class RegistrationHandle:
    """Undoes one registration when `destroy()` is called (once; later calls do nothing)."""

    __slots__ = ("_on_destroy", "description")

    def __init__(self, on_destroy: Callable[[], None], description: str = ""):
        self._on_destroy: Callable[[], None] | None = on_destroy
        self.description = description

    @property
    def destroyed(self) -> bool:
        return self._on_destroy is None

    def destroy(self) -> None:
        on_destroy, self._on_destroy = self._on_destroy, None
        if on_destroy is not None:
            on_destroy()

    def __repr__(self) -> str:
        state = "destroyed" if self.destroyed else "live"
        return f"<RegistrationHandle {self.description or '?'} ({state})>"


class HandleGroup(RegistrationHandle):
    """Handles destroyed together, newest first; a handle added after `destroy()` is destroyed at once.

    As a context manager it is all or nothing:

        with HandleGroup("lowering of my_op") as group:
            group.add(register_a())
            group.add(register_b())   # raises: a is taken back, the error propagates
        # no exception: the group keeps a and b (until its own destroy())

    If taking back fails too, that failure propagates, chained to the block's exception
    (`__context__`), as an ExitStack callback failing while unwinding does.
    """

    __slots__ = ("_members",)

    def __init__(self, description: str = ""):
        super().__init__(self._destroy_members, description)
        self._members: list[RegistrationHandle] = []

    def add(self, handle: RegistrationHandle) -> RegistrationHandle:
        if self.destroyed:
            handle.destroy()
        else:
            # Members destroyed on their own (e.g. a rolled-back installation) are dropped here.
            self._members = [m for m in self._members if not m.destroyed]
            self._members.append(handle)
        return handle

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        if exc_type is not None:
            self.destroy()  # the block failed: take back what it added
        return False  # never swallows the block's exception

    def __len__(self) -> int:
        """How many members are still live."""
        return sum(not m.destroyed for m in self._members)

    def _destroy_members(self) -> None:
        # Every member is destroyed even when one fails; the first failure is raised afterwards.
        failure: BaseException | None = None
        while self._members:
            try:
                self._members.pop().destroy()
            except BaseException as exc:  # re-raised below
                failure = failure or exc
        if failure is not None:
            raise failure
