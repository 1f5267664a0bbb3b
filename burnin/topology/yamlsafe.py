"""One hardened YAML reader for burnin's configuration files.

Topologies, inventories and the fabric settings are read here, never with
``yaml.safe_load``: a configuration file comes from a person or another tool
and must give a one-line :class:`ConfigError` (exit 2) in bounded time and
memory, whatever it holds:

- bytes that are not UTF-8: the error names the byte offset;
- a key written twice in one mapping (YAML keeps the last one silently, which
  would let a node listed twice slip past): the error names both lines;
- nesting deeper than :data:`MAX_DEPTH` levels: found while parsing, without
  recursion (a 100,000-deep file fails at level 65, or where libyaml's own
  limit of 1,000 stops its look-ahead);
- aliases: an alias to its own collection is an error, and the nodes that
  aliases add (counted as if expanded) may not exceed the document's own size
  (at least :data:`MIN_ALIAS_BUDGET`), so a "billion laughs" file fails after a
  few thousand events instead of expanding.

The document is built straight from the parser's events (libyaml's when
PyYAML has it, several times faster), with the line of every mapping key and
sequence item recorded by key path for error messages. Scalars get YAML 1.1
types exactly as ``yaml.safe_load`` gives them; ``<<`` merge keys work.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from burnin.errors import ConfigError
from burnin.text import printable

__all__ = ["MAX_DEPTH", "MIN_ALIAS_BUDGET", "Path_", "YamlDocument", "format_key_path", "load_yaml", "read_utf8"]

Path_ = tuple[str | int, ...]

#: Deepest nesting of mappings and sequences a configuration file may have.
MAX_DEPTH = 64
#: Nodes that aliases may add, at least; a bigger document may add as many as it has.
MIN_ALIAS_BUDGET = 100_000

_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_COLLECTION_TAGS = (None, "!", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_LOADER: Any = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


@dataclass(frozen=True)
class YamlDocument:
    """The data of one YAML file and the 1-based line of each key path in it."""

    data: Any
    lines: dict[Path_, int]


def format_key_path(path: Path_) -> str:
    """``("gpus", "devices", 3, "numa_node")`` → ``gpus.devices[3].numa_node``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return printable(out)


def read_utf8(path: Path) -> str:
    """The file's text; ConfigError when it cannot be read or is not UTF-8 (naming the byte offset)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(str(path), f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte offset {exc.start}",
                          line=line) from None


def load_yaml(path: str | Path) -> YamlDocument:
    """Read and parse one YAML configuration file (see the module's documentation)."""
    file = Path(path)
    text = read_utf8(file)
    loader: Any = None
    try:
        loader = _LOADER(text)
        return _Builder(file, loader).build()
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, most C0 controls, ...)
        line = text.count("\n", 0, exc.position) + 1
        code = ord(exc.character) if isinstance(exc.character, str) else int(exc.character)
        raise ConfigError(str(file), f"invalid YAML: character U+{code:04X} at character offset "
                          f"{exc.position} is not allowed", line=line) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        if "maximum nesting depth" in problem:  # libyaml stops at 1000 levels
            problem = f"nested deeper than {MAX_DEPTH} levels"
        raise ConfigError(str(file), f"invalid YAML: {printable(problem)}",
                          line=mark.line + 1 if mark is not None else None) from None
    finally:
        if loader is not None:
            loader.dispose()


class _Open:
    """A mapping or sequence whose end event has not come yet."""

    __slots__ = ("aliased_before", "anchor", "events_before", "is_map", "key", "key_line", "merges", "path",
                 "value")

    def __init__(self, value: dict[Any, Any] | list[Any], path: Path_, anchor: str | None,
                 events: int, aliased: int) -> None:
        self.value = value
        self.is_map = isinstance(value, dict)
        self.path = path
        self.anchor = anchor
        # Its size (nodes, aliases counted as expanded) is what these counters grow by until its end.
        self.events_before = events
        self.aliased_before = aliased
        self.key: Any = _NO_KEY
        self.key_line = 0
        self.merges: list[dict[Any, Any]] = []


_NO_KEY = object()
_MERGE_KEY = object()
_IN_PROGRESS = object()


class _Builder:
    def __init__(self, file: Path, loader: Any) -> None:
        self.file = file
        self.loader = loader
        self.lines: dict[Path_, int] = {}
        self.stack: list[_Open] = []
        # anchor -> (value, expanded size) once its node is complete; _IN_PROGRESS before
        self.anchors: dict[str, tuple[Any, int] | object] = {}
        self.events = 0
        self.aliased = 0  # nodes that aliases added, counted as if expanded
        self.root: Any = None
        # first characters for which some implicit type (int, bool, null, ...) may match
        resolvers = loader.yaml_implicit_resolvers
        self.implicit_first = None if resolvers.get(None) else frozenset(ch for ch in resolvers if ch is not None)
        self.typed: dict[tuple[str, str], Any] = {}  # plain numbers, booleans and nulls already read

    def fail(self, line: int, message: str, path: Path_ = ()) -> ConfigError:
        key = format_key_path(path[:8]) + ("..." if len(path) > 8 else "")
        return ConfigError(str(self.file), printable(message), key=key, line=line)  # anchors, keys: file text

    def build(self) -> YamlDocument:
        loader = self.loader
        documents = 0
        scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
        map_start, seq_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
        map_end, seq_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
        plain_first = self.implicit_first
        while loader.check_event():
            event = loader.get_event()
            self.events += 1
            kind = type(event)
            if kind is scalar:
                value = event.value
                if not (event.tag is None and plain_first is not None and value and event.implicit[0]
                        and value[0] not in plain_first):  # else: plain text no implicit type matches
                    value = self.scalar(event)
                line = event.start_mark.line + 1
                if event.anchor is not None:
                    self.new_anchor(event.anchor, line)
                    self.anchors[event.anchor] = (value, 1)
                self.add(value, line)
            elif kind is map_start or kind is seq_start:
                self.open(event, {} if kind is map_start else [])
            elif kind is map_end or kind is seq_end:
                self.close()
            elif kind is alias:
                self.alias(event)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise self.fail(event.start_mark.line + 1, "a configuration file holds one YAML document")
        return YamlDocument(self.root, self.lines)

    def scalar(self, event: Any) -> Any:
        tag, value = event.tag, event.value
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, value, event.implicit)
        if tag == _STR:
            return value
        known = self.typed.get((tag, value), _NO_KEY)
        if known is not _NO_KEY:
            return known
        if tag == _MERGE and self.stack and self.stack[-1].is_map and self.stack[-1].key is _NO_KEY:
            return _MERGE_KEY
        construct = self.loader.yaml_constructors.get(tag)
        if construct is None:
            raise self.fail(event.start_mark.line + 1, f"unsupported YAML tag {tag!r}", self.here())
        result = construct(self.loader, yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style))
        if result is None or isinstance(result, (bool, int, float)):  # immutable: the same text gives the same
            self.typed[(tag, value)] = result
        return result

    def here(self) -> Path_:
        """Key path of the node being read (for messages)."""
        if not self.stack:
            return ()
        top = self.stack[-1]
        if top.is_map:
            return top.path if top.key is _NO_KEY or top.key is _MERGE_KEY else (*top.path, top.key)
        return (*top.path, len(top.value))

    def open(self, event: Any, value: dict[Any, Any] | list[Any]) -> None:
        line = event.start_mark.line + 1
        if event.tag not in _COLLECTION_TAGS:
            raise self.fail(line, f"unsupported YAML tag {event.tag!r}", self.here())
        if len(self.stack) >= MAX_DEPTH:
            raise self.fail(line, f"nested deeper than {MAX_DEPTH} levels", self.here())
        path: Path_ = ()
        if self.stack:
            top = self.stack[-1]
            if top.is_map and top.key is _NO_KEY:
                raise self.fail(line, "a mapping key must be a plain value, not a mapping or sequence", top.path)
            path = self.here()
            if not top.is_map:
                self.lines[path] = line
        else:
            self.lines[()] = line
        anchor = event.anchor
        if anchor is not None:
            self.new_anchor(anchor, line)
            self.anchors[anchor] = _IN_PROGRESS
        self.stack.append(_Open(value, path, anchor, self.events, self.aliased))

    def close(self) -> None:
        done = self.stack.pop()
        value = done.value
        if done.merges:  # merged keys first, as yaml.safe_load orders them
            merged: dict[Any, Any] = {}
            for source in done.merges:
                for key, item in source.items():
                    merged.setdefault(key, item)
            merged.update(value)
            value = merged
        if done.anchor is not None:
            size = self.events - done.events_before + self.aliased - done.aliased_before
            self.anchors[done.anchor] = (value, size)
        self.add(value, 0, closing=True)

    def alias(self, event: Any) -> None:
        line = event.start_mark.line + 1
        target = self.anchors.get(event.anchor)
        if target is None:
            raise self.fail(line, f"alias *{event.anchor} names no anchor defined before it", self.here())
        if target is _IN_PROGRESS:
            raise self.fail(line, f"alias *{event.anchor} refers to itself (a collection inside its own anchor)",
                            self.here())
        assert isinstance(target, tuple)
        value, size = target
        self.aliased += size
        budget = max(MIN_ALIAS_BUDGET, self.events)
        if self.aliased > budget:
            raise self.fail(line, f"aliases expand to more than {budget:,} nodes (a YAML bomb?)", self.here())
        self.add(value, line)

    def new_anchor(self, anchor: str, line: int) -> None:
        if anchor in self.anchors:
            raise self.fail(line, f"anchor &{anchor} is defined twice", self.here())

    def add(self, value: Any, line: int, *, closing: bool = False) -> None:
        """Put a finished node where the parser is: the root, a mapping key or value, or a sequence item."""
        stack = self.stack
        if not stack:
            self.root = value
            if not closing:
                self.lines[()] = line
            return
        top = stack[-1]
        if not top.is_map:
            container: Any = top.value
            if not closing:
                item_path = (*top.path, len(container))
                self.lines[item_path] = line
            container.append(value)
        elif top.key is _NO_KEY:
            self.set_key(top, value, line)
        else:
            if top.key is _MERGE_KEY:
                self.merge(top, value, top.key_line)
            else:
                top.value[top.key] = value
            top.key = _NO_KEY

    def set_key(self, top: _Open, key: Any, line: int) -> None:
        if key is _MERGE_KEY:
            top.key, top.key_line = key, line
            return
        try:
            seen = key in top.value
        except TypeError:
            raise self.fail(line, "a mapping key must be a plain value, not a mapping or sequence", top.path) from None
        path = (*top.path, key)
        if seen:
            first = self.lines.get(path)
            raise self.fail(line, f"key {key!r} is written twice in this mapping (lines {first} and {line})", path)
        top.key, top.key_line = key, line
        self.lines[path] = line
        if isinstance(key, str) and key.isdigit():  # pydantic may name it either way
            alias: Path_ = (*top.path, int(key))
            self.lines[alias] = line
        elif isinstance(key, int) and not isinstance(key, bool):
            alias = (*top.path, str(key))
            self.lines[alias] = line

    def merge(self, top: _Open, value: Any, line: int) -> None:
        """``<<: *defaults`` or ``<<: [*a, *b]``: keys not written here come from those mappings.

        As the YAML merge-key spec says, a mapping earlier in the list wins over a later one.
        """
        sources = value if isinstance(value, list) else [value]
        for source in sources:
            if not isinstance(source, dict):
                raise self.fail(line, "a merge key (<<) takes a mapping or a list of mappings", top.path)
            top.merges.append(source)
