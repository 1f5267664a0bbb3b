"""Exception hierarchy. Each error carries the evidence a user needs to act on it."""

from __future__ import annotations


class BurninError(Exception):
    """Base class of every error burnin raises on purpose."""


class UsageError(BurninError):
    """The user asked for something that cannot be done (bad flag, unknown name)."""


class ConfigError(BurninError):
    """A configuration file (topology, inventory) is unreadable or invalid.

    The message names the file, the key path and the line.
    """

    def __init__(self, path: str, message: str, *, key: str = "", line: int | None = None) -> None:
        self.path = path
        self.key = key
        self.line = line
        where = path
        if line is not None:
            where += f":{line}"
        if key:
            where += f": {key}"
        super().__init__(f"{where}: {message}")


class ParseError(BurninError):
    """Tool output could not be read. Carries the tool name and an excerpt of the text."""

    def __init__(self, tool: str, message: str, excerpt: str = "") -> None:
        self.tool = tool
        self.excerpt = excerpt[:400]
        text = f"{tool}: {message}"
        if excerpt:
            text += f" near: {self.excerpt!r}"
        super().__init__(text)


class TransportError(BurninError):
    """A command could not be run on a node (connect failure, host key, timeout)."""
