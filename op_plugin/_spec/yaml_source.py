"""Reads a YAML file with the safe loader and remembers the line of every value.

The result is plain data (dict/list/str/int/float/bool/None) plus a map from each value's
path, e.g. ("ops", 0, "outputs", 1, "size"), to its 1-based line, so that validation can point
at the exact line of a bad field. Nothing in the file is executed: only PyYAML's SafeLoader
constructs scalars.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .._base.errors import Location, YamlSpecError
from .._base.paths import special_kind

Path_ = tuple  # a path into the document: keys and list indices
# Bounds that keep a hostile or broken file cheap to reject; a real op file is far inside them.
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64            # nesting of lists and mappings (an op entry needs about 6)
MAX_VALUES = 200_000      # values after alias expansion (an alias bomb expands exponentially)
# libyaml's parser when PyYAML has it (about 10x faster); same safe constructor either way.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class LocatedDocument:
    file: str
    data: Any
    lines: dict[Path_, int]

    def line(self, path: Path_) -> int:
        """Line of the value at `path`, or of its nearest located ancestor."""
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path, 1)

    def location(self, path: Path_, op: str | None = None, field: str | None = None) -> Location:
        return Location(self.file, self.line(path), op, field)


def read_located(path: str | Path) -> LocatedDocument:
    file = str(path)
    try:
        raw = _read_bounded(file)
        text = raw.decode("utf-8")
    except OSError as exc:
        raise YamlSpecError(Location(file, 1), f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise YamlSpecError(Location(file, 1), f"the file is not UTF-8 text: {exc.reason}") from None
    return parse_located(text, file)


def _read_bounded(file: str) -> bytes:
    """The file's bytes, refusing more than MAX_FILE_BYTES by what is read, not by what `stat`
    said before (a file may grow in between), and refusing anything but a regular file: a FIFO
    would block the open or the read until some writer came, a device such as /dev/zero never ends.
    The open does not block (O_NONBLOCK); the check is made on the opened file itself."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(file, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else special_kind(mode)
            raise YamlSpecError(Location(file, 1), f"the path is {kind}, not a regular file; op YAML files are read "
                                "from regular files")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_FILE_BYTES:
        raise YamlSpecError(Location(file, 1), f"the file has more than {MAX_FILE_BYTES} bytes; op YAML files are "
                            f"limited to {MAX_FILE_BYTES} bytes")
    return b"".join(chunks)


def parse_located(text: str, file: str = "<string>") -> LocatedDocument:
    _check_depth(text, file)
    loader = _SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise YamlSpecError(Location(file, line), f"not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise YamlSpecError(Location(file, 1), f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    lines: dict[Path_, int] = {}
    if root is None:
        return LocatedDocument(file, None, lines)
    data = _walk(loader, root, (), lines, file, _Budget(MAX_VALUES))
    return LocatedDocument(file, data, lines)


def _check_depth(text: str, file: str) -> None:
    """Refuse deep nesting before composing: the composer recurses once per level (a C stack
    overflow in libyaml's binding, a RecursionError in PyYAML's). The event stream is flat."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_SafeLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise YamlSpecError(Location(file, event.start_mark.line + 1),
                                        f"lists and mappings are nested more than {MAX_DEPTH} deep")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError as exc:
        # PyYAML >= 6.0.4's scanner has its own limit (1000) and, scanning ahead, stops there
        # before the events reach our count: the same refusal, in the same words
        mark = getattr(exc, "problem_mark", None)
        if "nesting depth" in str(getattr(exc, "problem", "") or ""):
            raise YamlSpecError(Location(file, mark.line + 1 if mark else 1),
                                f"lists and mappings are nested more than {MAX_DEPTH} deep") from None
        return  # reported with its line by the composer, which stops at the same place


class _Budget:
    """How many more values the walk may produce; aliases count each time they are expanded."""

    def __init__(self, values: int):
        self.left = values

    def spend(self, node: yaml.Node, file: str) -> None:
        self.left -= 1
        if self.left < 0:
            raise YamlSpecError(Location(file, node.start_mark.line + 1),
                                f"the file expands to more than {MAX_VALUES} values (YAML anchors and aliases "
                                "repeat what they point to); write the values out or reuse fewer")


_PLAIN_TAGS = {yaml.MappingNode: "tag:yaml.org,2002:map", yaml.SequenceNode: "tag:yaml.org,2002:seq"}


def _walk(loader: _SafeLoader, node: yaml.Node, path: Path_, lines: dict, file: str, budget: _Budget) -> Any:
    budget.spend(node, file)
    lines.setdefault(path, node.start_mark.line + 1)
    plain_tag = _PLAIN_TAGS.get(type(node))
    if plain_tag and node.tag != plain_tag:
        # SafeLoader would construct a tagged list or mapping as if untagged; refuse it instead.
        raise YamlSpecError(Location(file, node.start_mark.line + 1), _tag_message(node.tag))
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(loader, key_node, file) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                raise YamlSpecError(Location(file, key_node.start_mark.line + 1), "mapping keys must be plain names")
            if key in out:
                # PyYAML would silently keep the last one; a duplicated field is almost always a mistake.
                raise YamlSpecError(Location(file, key_node.start_mark.line + 1), f"duplicate key '{key}'")
            # A field's line is its key's line, also when its value is a block starting below.
            lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = _walk(loader, value_node, path + (key,), lines, file, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(loader, item, path + (i,), lines, file, budget) for i, item in enumerate(node.value)]
    return _scalar(loader, node, file)


def _scalar(loader: _SafeLoader, node: yaml.Node, file: str) -> Any:
    try:
        return loader.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError:
        raise YamlSpecError(Location(file, node.start_mark.line + 1), _tag_message(node.tag)) from None
    except yaml.YAMLError as exc:
        raise YamlSpecError(Location(file, node.start_mark.line + 1),
                            f"bad value: {exc.problem if hasattr(exc, 'problem') else exc}") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer with more digits than Python converts
        raise YamlSpecError(Location(file, node.start_mark.line + 1), f"bad value: {exc}") from exc


def _tag_message(tag: str) -> str:
    return f"the tag '{tag}' is not allowed: op YAML files are plain data (strings, numbers, lists, mappings)"
