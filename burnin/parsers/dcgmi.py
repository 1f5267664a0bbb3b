"""``dcgmi diag``: the text table and the ``-j`` JSON document.

Text table: ``| Name | Result |`` rows grouped by ``|----- Section ---|``
separators. A row whose first cell is empty continues the row above: either
another per-GPU result (``Fail - GPU: 0``) or wrapped text, which DCGM cuts at
a fixed width regardless of words (so chunks are joined without adding
spaces). ``Warning``/``Error``/``Info`` rows are details of the test above.
DCGM 4 prints a test's row, its global warnings, then one row per entity
(``GPU0: Pass``), each followed by that entity's ``Warning: GPU0`` rows; an
entity row ends the detail above it, never continues its text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from burnin.parsers._common import fail, head_excerpt, iter_lines, require_text
from burnin.parsers.dcgmi_errors import command_errors as command_errors  # where it always was, for importers

TOOL = "dcgmi-diag"
RESULTS = ("Pass", "Fail", "Warn", "Skip")
# Worst first: a test's result is the worst of its per-GPU results; one DCGM printed otherwise
# ("Not Run") ranks above Pass, so a GPU that did not run is never hidden behind the others' Pass.
_ORDER = {"Fail": 0, "Warn": 1, "Pass": 3, "Skip": 4}
_OTHER = 2


@dataclass(frozen=True, slots=True)
class DcgmiDetail:
    kind: str  # "Warning", "Error" or "Info"
    text: str


@dataclass(frozen=True, slots=True)
class DcgmiTest:
    name: str
    category: str | None  # "Deployment", "Integration", "Hardware", "Stress", ...
    result: str  # worst of the per-GPU results: "Pass", "Fail", "Warn", "Skip" (or as printed)
    gpu_results: dict[str, tuple[int, ...]]  # "Pass" -> (1, 2, ...); empty when not per GPU
    details: tuple[DcgmiDetail, ...]


@dataclass(frozen=True, slots=True)
class DcgmiDiag:
    format: str  # "text" or "json"
    tests: tuple[DcgmiTest, ...]
    results: dict[str, str]  # test name -> result (last one wins on duplicate names)
    metadata: dict[str, str]  # "DCGM Version", "Driver Version Detected", ...
    errors: tuple[str, ...]  # every Error detail, including those with no test above them
    warnings: tuple[str, ...]  # every Warning detail
    truncated: bool  # text table without its closing "+---+---+" border


_SECTION = re.compile(r"^[|+]-+\s+([A-Za-z][\w /-]{0,60}?)\s+-+[+|]")
_RESULT = re.compile(r"^(Pass|Fail|Warn|Warning|Skip|Skipped)\b(?: - GPUs?: ([\d, ]{0,200}))?")
# DCGM 4's per-entity row (dcgmi/Diag.cpp HelperDisplayEntityResults): "<group><id>: <result>", the whole cell.
_ENTITY_RESULT = re.compile(
    r"(GPU|CPU|Switch|Link|GPU_I|GPU_CI|CPU_Core|VGPU) ?(\d{1,4}): (Pass|Fail|Warn|Skip|Not Run)")
_DETAIL_KINDS = {"warning": "Warning", "error": "Error", "info": "Info"}


def _norm(result: str) -> str:
    if result.strip() == "Not Run":
        return "Not Run"
    r = result.strip().capitalize()
    return {"Warning": "Warn", "Skipped": "Skip", "Passed": "Pass", "Failed": "Fail"}.get(r, r)


def _gpu_ids(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    return tuple(int(t) for t in re.findall(r"\d{1,4}", text))


def _worst(results: dict[str, tuple[int, ...]], default: str) -> str:
    if not results:
        return default
    return min(results, key=lambda r: _ORDER.get(r, _OTHER))


class _Text:
    """Wrapped text of one detail row: chunks and whether each filled its cell."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.chunks: list[tuple[str, bool]] = []

    def text(self) -> str:
        out = ""
        full_before = False
        for chunk, full in self.chunks:
            if out and not full_before:
                out += " " + chunk.lstrip()
            else:
                out += chunk
            full_before = full
        return " ".join(out.split())


class _TestDraft:
    def __init__(self, name: str, category: str | None, first: str) -> None:
        self.name = name
        self.category = category
        self.first = first
        self.gpu_results: dict[str, tuple[int, ...]] = {}
        self.details: list[_Text] = []

    def add_result(self, cell: str) -> None:
        """A DCGM 3 result cell: ``Pass``, ``Fail - GPU: 0``, ``Pass - GPUs: 1, 2``."""
        m = _RESULT.match(cell)
        if m is not None:
            res = _norm(m.group(1))
            self.gpu_results[res] = self.gpu_results.get(res, ()) + _gpu_ids(m.group(2))

    def add_entity_result(self, cell: str) -> bool:
        """A DCGM 4 ``GPU0: Pass`` row; another entity's (``CPU0: Fail``) counts toward the result only."""
        m = _ENTITY_RESULT.fullmatch(cell)
        if m is None:
            return False
        ids = (int(m.group(2)),) if m.group(1) == "GPU" else ()
        res = _norm(m.group(3))
        self.gpu_results[res] = self.gpu_results.get(res, ()) + ids
        return True

    def build(self) -> DcgmiTest:
        first = _RESULT.match(self.first)
        default = _norm(first.group(1)) if first else self.first
        return DcgmiTest(
            name=self.name,
            category=self.category,
            result=_worst(self.gpu_results, default),
            gpu_results={k: v for k, v in self.gpu_results.items() if v},
            details=tuple(DcgmiDetail(d.kind, d.text()) for d in self.details),
        )


def _cells(line: str) -> tuple[str, str, bool] | None:
    """Name cell, value cell (one pad space removed) and whether the value filled its cell."""
    if not line.startswith("|"):
        return None
    parts = line.split("|")
    if len(parts) < 3:
        return None
    name = parts[1].strip()
    raw = parts[2]
    value = (raw[1:] if raw.startswith(" ") else raw).rstrip()
    closed = len(parts) > 3
    # DCGM wraps text at 45 characters in a 46-wide cell: a chunk that long may go on in the next row.
    # A value as wide as the cell (eight GPU ids) keeps its last character.
    full = closed and len(value) >= len(raw) - 3
    return name, value, full


def _parse_text(text: str) -> DcgmiDiag:
    tests: list[_TestDraft] = []
    metadata: dict[str, str] = {}
    orphans: list[_Text] = []
    category: str | None = None
    detail: _Text | None = None
    meta_key: str | None = None
    seen_table = False
    closed = False
    for raw in iter_lines(text):
        s = raw.strip()
        if not s:
            continue
        if s.startswith("+") and set(s) <= {"+", "-", "="}:
            seen_table, closed = True, "=" not in s
            continue
        if s.startswith(("|", "+")):
            closed = False
        m = _SECTION.match(s)
        if m:
            seen_table = True
            category, detail, meta_key = m.group(1).strip(), None, None
            continue
        cells = _cells(s)
        if cells is None:
            continue
        seen_table = True
        name, value, full = cells
        if name in ("Diagnostic", "Test Name") and value.strip() == "Result":
            continue
        if category is not None and category.lower() == "metadata":
            if name:
                meta_key = name
                metadata[name] = value.strip()
            elif meta_key:
                metadata[meta_key] = f"{metadata[meta_key]} {value.strip()}"
            continue
        if not name:
            if tests and tests[-1].add_entity_result(value.strip()):
                detail = None
                continue
            if detail is not None:
                detail.chunks.append((value, full))
            elif tests:
                tests[-1].add_result(value.strip())
            continue
        # "Warning", or DCGM 4's "Warning: GPU0" style.
        kind = _DETAIL_KINDS.get(name.replace(":", " ").split(maxsplit=1)[0].lower()) if name.strip(":") else None
        if kind is not None:
            detail = _Text(kind)
            detail.chunks.append((value, full))
            (tests[-1].details if tests else orphans).append(detail)
            continue
        detail = None
        draft = _TestDraft(name, category, value.strip())
        draft.add_result(value.strip())
        tests.append(draft)
    if not seen_table or (not tests and not metadata and not orphans):
        fail(TOOL, "no dcgmi diag result table found", head_excerpt(text))
    built = [t.build() for t in tests]
    all_details = [d for t in built for d in t.details] + [DcgmiDetail(o.kind, o.text()) for o in orphans]
    return DcgmiDiag(
        format="text",
        tests=tuple(built),
        results={t.name: t.result for t in built},
        metadata=metadata,
        errors=tuple(d.text for d in all_details if d.kind == "Error"),
        warnings=tuple(d.text for d in all_details if d.kind == "Warning"),
        truncated=not closed,
    )


def _texts(value: Any) -> list[str]:
    """Warning/info entries: strings, or objects with a "warning"/"message" field."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, str) and item.strip():
            out.append(item.strip())
        elif isinstance(item, dict):
            for key in ("warning", "message", "error", "info"):
                if isinstance(item.get(key), str):
                    out.append(str(item[key]).strip())
                    break
    return out


def _parse_json(doc: Any) -> DcgmiDiag:
    root = doc
    if isinstance(doc, dict):
        for key in ("DCGM GPU Diagnostic", "DCGM Diagnostic"):
            if isinstance(doc.get(key), dict):
                root = doc[key]
                break
    if not isinstance(root, dict):
        fail(TOOL, "JSON document is not an object")
    categories = root.get("test_categories")
    if not isinstance(categories, list):
        fail(TOOL, "JSON document has no 'test_categories' list", json.dumps(root)[:300])
    metadata = {k: str(v) for k, v in root.items() if isinstance(v, (str, int, float)) and k != "runtime_error"}
    tests: list[DcgmiTest] = []
    for cat in categories:
        if not isinstance(cat, dict) or not isinstance(cat.get("tests"), list):
            continue
        cname = cat.get("category") if isinstance(cat.get("category"), str) else None
        for test in cat["tests"]:
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                continue
            gpu_results: dict[str, tuple[int, ...]] = {}
            details: list[DcgmiDetail] = []
            results = test.get("results")
            for res in results if isinstance(results, list) else []:
                if not isinstance(res, dict):
                    continue
                status = _norm(str(res.get("status", "")))
                ids_raw = res.get("gpu_ids", res.get("gpu_id", res.get("entity_id", "")))
                ids = _gpu_ids(str(ids_raw)) if ids_raw is not None else ()
                gpu_results[status] = gpu_results.get(status, ()) + ids
                details += [DcgmiDetail("Warning", t) for t in _texts(res.get("warnings", []))]
                details += [DcgmiDetail("Info", t) for t in _texts(res.get("info", []))]
            tests.append(
                DcgmiTest(
                    name=test["name"],
                    category=cname,
                    result=_worst(gpu_results, "Skip"),
                    gpu_results={k: v for k, v in gpu_results.items() if v},
                    details=tuple(details),
                )
            )
    errors = _texts(root.get("runtime_error", []))
    return DcgmiDiag(
        format="json",
        tests=tuple(tests),
        results={t.name: t.result for t in tests},
        metadata=metadata,
        errors=tuple(errors),
        warnings=tuple(d.text for t in tests for d in t.details if d.kind == "Warning"),
        truncated=False,
    )


def parse_dcgmi_diag(text: str) -> DcgmiDiag:
    """Parse ``dcgmi diag`` output, text table or ``-j`` JSON (leading chatter allowed)."""
    require_text(TOOL, text)
    brace = text.find("{")
    if brace >= 0 and "|" not in text[:brace]:
        try:
            doc = json.loads(text[brace : text.rfind("}") + 1])
        except (ValueError, RecursionError):
            doc = None
        if doc is not None:
            return _parse_json(doc)
    return _parse_text(text)
