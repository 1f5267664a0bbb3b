"""Where and how to reach a node over SSH: ssh_config, inventory overrides and known_hosts.

:class:`SshConfigResolver` turns a node name into an :class:`Endpoint` the way
OpenSSH would (``HostName``, ``User``, ``Port``, ``IdentityFile``,
``ProxyJump``, ``UserKnownHostsFile``, ``ConnectTimeout``,
``ServerAliveInterval``), with explicit inventory values taking precedence.
:class:`KnownHosts` checks host keys strictly: an unknown key is refused unless
``accept_new`` (then it is recorded, like OpenSSH's ``accept-new``), and a
changed key is always refused.
"""

from __future__ import annotations

import getpass
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burnin.errors import TransportError, UsageError
from burnin.transport.sshlib import paramiko

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_KEEPALIVE = 15.0
DEFAULT_IDENTITIES = ("id_ed25519", "id_ecdsa", "id_rsa")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
MAX_JUMPS = 8
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\$?$")
_HOST = re.compile(r"^[A-Za-z0-9_.:%\[\]-]{1,253}$")
_SETTING = paramiko.SSHConfig.SETTINGS_REGEX


class HostKeyError(TransportError):
    """The server's host key is unknown or differs from the recorded one."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Everything needed to open and authenticate one SSH connection."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[Path, ...]
    identities_only: bool
    known_hosts: KnownHosts
    host_key_alias: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    keepalive_s: float = DEFAULT_KEEPALIVE
    jumps: tuple[Endpoint, ...] = field(default=())

    @property
    def host_key_name(self) -> str:
        """The name the host key is recorded under (OpenSSH's rules, incl. HostKeyAlias)."""
        name = self.host_key_alias or self.hostname
        return name if self.port == 22 or self.host_key_alias else f"[{name}]:{self.port}"

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


class KnownHosts:
    """Host keys from known_hosts files, parsed once and shared by every connection."""

    def __init__(self, user_files: tuple[Path, ...], global_files: tuple[Path, ...] = (),
                 *, accept_new: bool = False) -> None:
        self.user_files = user_files
        self.global_files = global_files
        self.accept_new = accept_new
        self._lock = threading.Lock()
        self._keys: paramiko.HostKeys | None = None

    @property
    def files(self) -> tuple[Path, ...]:
        return self.user_files + self.global_files

    def _loaded(self) -> paramiko.HostKeys:
        with self._lock:
            if self._keys is None:
                keys = paramiko.HostKeys()
                for path in self.files:
                    if path.is_file():
                        _load_known_hosts(keys, path)
                self._keys = keys
            return self._keys

    def known_types(self, name: str) -> list[str]:
        """Key types recorded for ``name`` (so the handshake can prefer one of them)."""
        found = self._loaded().lookup(name)
        return list(found.keys()) if found is not None else []

    def check(self, name: str, key: paramiko.PKey) -> None:
        """Accept ``key`` for ``name`` or raise :class:`HostKeyError` saying why not."""
        keys = self._loaded()
        found = keys.lookup(name)
        where = ", ".join(str(p) for p in self.files) or "no known_hosts file"
        if found is None:
            if not self.accept_new:
                raise HostKeyError(
                    f"host key unknown: {name} is not in known_hosts ({where}); "
                    f"server offers {key.get_name()} {key.fingerprint}. Verify and record it, "
                    "or pass --accept-new-host-keys")
            self._record(name, key)
            return
        recorded = found.get(key.get_name())
        if recorded is None or recorded != key:
            theirs = ", ".join(f"{t} {k.fingerprint}" for t, k in found.items())
            raise HostKeyError(
                f"host key CHANGED for {name}: server offers {key.get_name()} {key.fingerprint}, "
                f"known_hosts ({where}) has {theirs}; refusing to connect "
                "(reinstalled node or man-in-the-middle)")

    def _record(self, name: str, key: paramiko.PKey) -> None:
        if not self.user_files:
            raise HostKeyError(f"host key unknown: {name}, and no UserKnownHostsFile to record it in")
        target = self.user_files[0]
        line = f"{name} {key.get_name()} {key.get_base64()}\n"
        with self._lock:
            assert self._keys is not None
            if self._keys.lookup(name) is None:
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
                self._keys.add(name, key.get_name(), key)


def _load_known_hosts(keys: paramiko.HostKeys, path: Path) -> None:
    """Add ``path``'s entries to ``keys``; an error names the file and line, never its content."""
    try:
        keys.load(str(path))
    except UnicodeDecodeError as exc:
        raise TransportError(f"cannot read known_hosts {path}: not UTF-8 text "
                             f"(byte offset {exc.start})") from None
    except paramiko.hostkeys.InvalidHostKey as exc:
        where = ""
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            where = next((f" line {n}" for n, line in enumerate(lines, 1) if line.strip() == exc.line), "")
        except (OSError, UnicodeDecodeError):
            pass
        raise TransportError(f"cannot read known_hosts {path}{where}: the key is not valid base64") from None
    except (OSError, paramiko.SSHException) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise TransportError(f"cannot read known_hosts {path}: {detail}") from None


_PATTERN_CHARACTERS = frozenset("*?[,")


class StanzaIndex:
    """Per name, a config of only the stanzas that can apply to it, for paramiko's ``lookup``.

    paramiko's ``SSHConfig.lookup`` walks every stanza twice per name and, for each one whose
    ``Host`` patterns do not match, evaluates its (empty) ``Match`` criteria, which starts by asking
    the user database for the local user name. A generated config with one ``Host`` block per node
    makes resolving a fleet quadratic: 56 ms a lookup at 1,024 blocks, about a minute of one core
    before the first connection of a 1,024-node run. A ``Host`` stanza whose patterns, negated
    ones aside, are all literal names (no ``*?[``) can match those names alone, so it is indexed by
    them (a negated pattern only narrows a stanza further, and paramiko still checks it); every
    other stanza (wildcards, ``Match``, the implicit leading ``Host *``) is kept for every name.
    ``lookup`` on the result gives what it gives on the whole config: the same stanzas apply, in
    file order. With ``CanonicalizeHostname`` anywhere (the name can change between paramiko's two
    passes) the whole config is used.
    """

    def __init__(self, config: paramiko.SSHConfig) -> None:
        self._config = config
        self._generic: list[tuple[int, dict[str, Any]]] = []
        self._by_name: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        stanzas = getattr(config, "_config", None)
        self._indexed = False
        if not isinstance(stanzas, list) or any("canonicalizehostname" in s.get("config", {}) for s in stanzas):
            return
        self._indexed = True
        for position, stanza in enumerate(stanzas):
            patterns = stanza.get("host")
            positive = [p for p in patterns if not p.startswith("!")] if isinstance(patterns, list) else None
            if positive is not None and "matches" not in stanza and not any(
                    _PATTERN_CHARACTERS & set(pattern) for pattern in positive):
                for name in dict.fromkeys(positive):
                    self._by_name.setdefault(name, []).append((position, stanza))
            else:
                self._generic.append((position, stanza))

    def config_for(self, name: str) -> paramiko.SSHConfig:
        """The config to look ``name`` up in: its own stanzas and the generic ones, in file order."""
        if not self._indexed:
            return self._config
        stanzas = sorted([*self._generic, *self._by_name.get(name, ())], key=lambda item: item[0])
        config = paramiko.SSHConfig()
        config._config = [stanza for _, stanza in stanzas]  # type: ignore[attr-defined]  # its stanza list (paramiko 3.4-5.x)
        return config


class SshConfigResolver:
    """Resolve node names through an ssh_config file (OpenSSH's first-match-wins rules)."""

    def __init__(self, config_path: Path | None = None, *, accept_new: bool = False,
                 use_default_config: bool = True) -> None:
        self.config_path = config_path
        self.accept_new = accept_new
        self._config = paramiko.SSHConfig()
        if config_path is not None:
            if not config_path.is_file():
                raise UsageError(f"ssh config not found: {config_path}")
            self._config = _parse_config(config_path)
        elif use_default_config:
            default = Path("~/.ssh/config").expanduser()
            if default.is_file():
                self.config_path = default
                self._config = _parse_config(default)
        self._stanzas = StanzaIndex(self._config)
        self._known_hosts: dict[tuple[tuple[Path, ...], tuple[Path, ...], bool], KnownHosts] = {}

    def resolve(self, name: str, *, address: str | None = None, user: str | None = None,
                port: int | None = None) -> Endpoint:
        """The endpoint for ``name``; explicit ``address``/``user``/``port`` win over the config."""
        return self._resolve(name, address, user, port, depth=0)

    def _resolve(self, name: str, address: str | None, user: str | None, port: int | None,
                 depth: int) -> Endpoint:
        try:
            options = self._stanzas.config_for(name).lookup(name)
        except (paramiko.ConfigParseError, paramiko.config.CouldNotCanonicalize, ImportError,
                ValueError, KeyError) as exc:
            raise UsageError(f"{self.config_path or 'ssh config'}: cannot apply it to {name} "
                             f"({type(exc).__name__}; Match exec and CanonicalizeHostname are "
                             "not supported)") from None
        hostname = address or options.get("hostname") or name
        resolved_user = user or options.get("user") or getpass.getuser()
        resolved_port = port or _int_option(options, "port", 22, self.config_path, name)
        if not _HOST.match(hostname):
            raise UsageError(f"{name}: invalid host name {hostname!r}")
        if not _USER.match(resolved_user):
            raise UsageError(f"{name}: invalid user name {resolved_user!r}")
        if not 0 < resolved_port < 65536:
            raise UsageError(f"{name}: invalid port {resolved_port}")
        jumps: tuple[Endpoint, ...] = ()
        spec = options.get("proxyjump", "none").strip()
        if spec.lower() != "none" and spec:
            if depth >= MAX_JUMPS:
                raise UsageError(f"{name}: ProxyJump chain longer than {MAX_JUMPS} hops (a loop?)")
            if "proxycommand" in options:
                raise UsageError(f"{name}: both ProxyJump and ProxyCommand are set")
            jumps = self._jump_chain(spec, depth)
        elif "proxycommand" in options and options["proxycommand"].lower() != "none":
            raise UsageError(f"{name}: ProxyCommand is not supported; use ProxyJump")
        strict = options.get("stricthostkeychecking", "yes").lower()
        return Endpoint(
            alias=name,
            hostname=hostname,
            port=resolved_port,
            user=resolved_user,
            identity_files=self._identities(options),
            identities_only=options.get("identitiesonly", "no").lower() == "yes",
            known_hosts=self._known_hosts_for(options, self.accept_new or strict == "accept-new"),
            host_key_alias=options.get("hostkeyalias"),
            connect_timeout=float(_int_option(options, "connecttimeout", int(DEFAULT_CONNECT_TIMEOUT),
                                              self.config_path, name)),
            keepalive_s=float(_int_option(options, "serveraliveinterval", int(DEFAULT_KEEPALIVE),
                                          self.config_path, name)),
            jumps=jumps,
        )

    def _jump_chain(self, spec: str, depth: int) -> tuple[Endpoint, ...]:
        """``[user@]host[:port],...`` (or ``ssh://`` URIs): each hop reached through the previous."""
        hops: list[Endpoint] = []
        for item in spec.split(","):
            hop_user, hop_host, hop_port = parse_jump(item.strip())
            hop = self._resolve(hop_host, None, hop_user, hop_port, depth + 1)
            if not hops:
                hops.extend(hop.jumps)  # the first hop's own ProxyJump, as OpenSSH does
            hops.append(_without_jumps(hop))
        return tuple(hops)

    def _identities(self, options: paramiko.SSHConfigDict) -> tuple[Path, ...]:
        files = options.get("identityfile")
        if files:
            return tuple(Path(os.path.expanduser(f)) for f in files)
        home = Path("~/.ssh").expanduser()
        return tuple(home / n for n in DEFAULT_IDENTITIES if (home / n).is_file())

    def _known_hosts_for(self, options: paramiko.SSHConfigDict, accept_new: bool) -> KnownHosts:
        user_files = _paths(options.get("userknownhostsfile"), ("~/.ssh/known_hosts",))
        global_files = _paths(options.get("globalknownhostsfile"), DEFAULT_GLOBAL_KNOWN_HOSTS)
        key = (user_files, global_files, accept_new)
        if key not in self._known_hosts:
            self._known_hosts[key] = KnownHosts(user_files, global_files, accept_new=accept_new)
        return self._known_hosts[key]


def parse_jump(item: str) -> tuple[str | None, str, int | None]:
    """``user@host:port`` → (user, host, port); user and port optional."""
    text = item.removeprefix("ssh://")
    user: str | None = None
    if "@" in text:
        user, _, text = text.rpartition("@")
    port: int | None = None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            port = _port(rest[1:], item)
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = _port(port_text, item)
    else:
        host = text
    if not host:
        raise UsageError(f"invalid ProxyJump host {item!r}")
    return user or None, host, port


def _port(text: str, item: str) -> int:
    if not text.isdigit():
        raise UsageError(f"invalid port in ProxyJump {item!r}")
    return int(text)


def _without_jumps(endpoint: Endpoint) -> Endpoint:
    from dataclasses import replace

    return replace(endpoint, jumps=())


def _paths(value: str | None, default: tuple[str, ...]) -> tuple[Path, ...]:
    items = value.split() if value else list(default)
    return tuple(Path(os.path.expanduser(p)) for p in items if p != "/dev/null" and p.lower() != "none")


def _int_option(options: paramiko.SSHConfigDict, key: str, default: int, path: Path | None,
                name: str) -> int:
    value = options.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        where = f"{path}{_bad_number_line(path, key)}" if path is not None else "ssh config"
        raise UsageError(f"{where}: {key} for {name} is not a number") from None


def _read_text(path: Path, what: str) -> str:
    """The file as UTF-8 text; a UsageError naming the file (and the byte offset) otherwise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or type(exc).__name__}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {what} {path}: not UTF-8 text (byte offset {exc.start})") from None


def _parse_config(path: Path) -> paramiko.SSHConfig:
    """Parse an ssh_config; an error names the file and the line, never the line's content.

    burnin may be pointed at any file (``--ssh-config /etc/shadow``): echoing a
    line it cannot parse would print part of a file the user may not be meant to read.
    """
    text = _read_text(path, "ssh config")
    try:
        return paramiko.SSHConfig.from_text(text)
    except (paramiko.ConfigParseError, ValueError):
        pass
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not _SETTING.match(stripped):
            raise UsageError(f"cannot read ssh config {path}: line {number} is not 'Keyword value' "
                             "(is this an ssh_config file?)")
        try:
            paramiko.SSHConfig.from_text(stripped)
        except (paramiko.ConfigParseError, ValueError):
            raise UsageError(f"cannot read ssh config {path}: line {number}: invalid "
                             "Host or Match patterns (unbalanced quotes or a missing value)") from None
    raise UsageError(f"cannot read ssh config {path}: not a valid ssh_config file")


def _bad_number_line(path: Path | None, key: str) -> str:
    """`` line N``: the first ``key`` setting in ``path`` whose value is not a number ('' if none)."""
    if path is None:
        return ""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    for number, line in enumerate(lines, 1):
        match = _SETTING.match(line.strip())
        if match is None or match.group(1).lower() != key:
            continue
        try:
            int(match.group(2).strip('"'))
        except ValueError:
            return f" line {number}"
    return ""
