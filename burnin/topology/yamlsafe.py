"""One hardened YAML reader for burnin's configuration files.

Topologies, inventories and the fabric settings are read here, never with
``yaml.safe_load``: a configuration file comes from a person or another tool
and must give a one-line :class:`ConfigError` (exit 2) in bounded time and
memory, whatever it holds:

- bytes that are not UTF-8: the error names the byte offset;
- a key written twice in one mapping (YAML keeps the last one silently, which
  would let a node listed twice slip past): the error names both lines;
- nesting deeper than :data:`MAX_DEPTH` levels: found while parsing, without
  recursion (a 100,000-deep file fails at level 65);
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
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, most C0 controls)
        line = text.count("\n", 0, exc.position) + 1
        code = ord(exc.character) if isinstance(exc.character, str) else int(exc.character)
        raise ConfigError(str(file), f"invalid YAML: control character U+{code:04X} at character offset "
                          f"{exc.position} is not allowed", line=line) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        if "maximum nesting depth" in problem:  # libyaml stops at 1000 levels
            problem = f"nested deeper than {MAX_DEPTH} levels"
        raise ConfigError(str(file), f"invalid YAML: {problem}",
                          line=mark.line + 1 if mark is not None else None) from None
    finally:
        if loader is not None:
            loader.dispose()


class _Open:
    """A mapping or sequence whose end event has not come yet."""

    __slots__ = ("anchor", "key", "key_line", "merges", "path", "size", "value")

    def __init__(self, value: dict[Any, Any] | list[Any], path: Path_, anchor: str | None) -> None:
        self.value = value
        self.path = path
        self.anchor = anchor
        self.size = 1  # this node and everything under it, aliases counted as expanded
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
        self.aliased = 0
        self.root: Any = None
        # first characters for which some implicit type (int, bool, null, ...) may match
        resolvers = loader.yaml_implicit_resolvers
        self.implicit_first = None if resolvers.get(None) else frozenset(ch for ch in resolvers if ch is not None)
        self.typed: dict[tuple[str, str], Any] = {}  # plain numbers, booleans and nulls already read

    def fail(self, line: int, message: str, path: Path_ = ()) -> ConfigError:
        key = format_key_path(path[:8]) + ("..." if len(path) > 8 else "")
        return ConfigError(str(self.file), message, key=key, line=line)

    def build(self) -> YamlDocument:
        loader = self.loader
        documents = 0
        scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
        map_start, seq_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
        map_end, seq_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
        while loader.check_event():
            event = loader.get_event()
            self.events += 1
            kind = type(event)
            if kind is scalar:
                self.add(self.scalar(event), event.start_mark.line + 1, 1, event.anchor)
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
            if value and event.implicit[0] and self.implicit_first is not None \
                    and value[0] not in self.implicit_first:
                return value  # a plain scalar no implicit type can match: a string
            tag = self.loader.resolve(yaml.ScalarNode, value, event.implicit)
        if tag == _STR:
            return value
        known = self.typed.get((tag, value), _NO_KEY)
        if known is not _NO_KEY:
            return known
        if tag == _MERGE and self.stack and isinstance(self.stack[-1].value, dict) \
                and self.stack[-1].key is _NO_KEY:
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
        if isinstance(top.value, dict):
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
            if isinstance(top.value, dict) and top.key is _NO_KEY:
                raise self.fail(line, "a mapping key must be a plain value, not a mapping or sequence", top.path)
            path = self.here()
            if isinstance(top.value, list):
                self.lines[path] = line
        else:
            self.lines[()] = line
        anchor = event.anchor
        if anchor is not None:
            self.new_anchor(anchor, line)
            self.anchors[anchor] = _IN_PROGRESS
        self.stack.append(_Open(value, path, anchor))

    def close(self) -> None:
        done = self.stack.pop()
        value = done.value
        if isinstance(value, dict) and done.merges:  # merged keys first, as yaml.safe_load orders them
            merged: dict[Any, Any] = {}
            for source in done.merges:
                for key, item in source.items():
                    merged.setdefault(key, item)
            merged.update(value)
            value = merged
        if done.anchor is not None:
            self.anchors[done.anchor] = (value, done.size)
        self.add(value, 0, done.size, None, closing=True)

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
        if self.aliased > max(MIN_ALIAS_BUDGET, self.events):
            raise self.fail(line, f"aliases expand to more than {max(MIN_ALIAS_BUDGET, self.events):,} nodes "
                            "(a YAML bomb?)", self.here())
        self.add(value, line, size, None)

    def new_anchor(self, anchor: str, line: int) -> None:
        if anchor in self.anchors:
            raise self.fail(line, f"anchor &{anchor} is defined twice", self.here())

    def add(self, value: Any, line: int, size: int, anchor: str | None, *, closing: bool = False) -> None:
        """Put a finished node where the parser is: the root, a mapping key or value, or a sequence item."""
        if anchor is not None:
            self.new_anchor(anchor, line)
            self.anchors[anchor] = (value, size)
        if not self.stack:
            self.root = value
            if not closing:
                self.lines[()] = line
            return
        top = self.stack[-1]
        top.size += size
        container = top.value
        if isinstance(container, list):
            if not closing:
                self.lines[top.path + (len(container),)] = line
            container.append(value)
        elif top.key is _NO_KEY:
            self.set_key(top, value, line)
        else:
            key = top.key
            if key is _MERGE_KEY:
                self.merge(top, value, top.key_line)
            else:
                container[key] = value
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
        if isinstance(key, str) and key.isdigit():
            self.lines[top.path + (int(key),)] = line
        elif isinstance(key, int) and not isinstance(key, bool):
            self.lines[top.path + (str(key),)] = line

    def merge(self, top: _Open, value: Any, line: int) -> None:
        """``<<: *defaults`` or ``<<: [*a, *b]``: keys not written here come from those mappings.

        As the YAML merge-key spec says, a mapping earlier in the list wins over a later one.
        """
        sources = value if isinstance(value, list) else [value]
        for source in sources:
            if not isinstance(source, dict):
                raise self.fail(line, "a merge key (<<) takes a mapping or a list of mappings", top.path)
            top.merges.append(source)
