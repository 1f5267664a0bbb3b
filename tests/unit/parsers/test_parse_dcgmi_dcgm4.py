"""DCGM 4's per-entity rows, in the order NVIDIA/DCGM ``dcgmi/Diag.cpp`` prints them (4.6.0).

``HelperDisplayGlobalResult`` prints the test row and its global ``Warning`` rows;
``HelperDisplayEntityResults`` then prints per entity ``<group><id>: <result>`` and that entity's
``Warning: GPU0`` rows. The real samples are in tests/field (test_field_gpu.py); these rows are
the shapes those samples do not show: a failing GPU with its own warning, a CPU entity, Not Run.
"""

from __future__ import annotations

from burnin.parsers.dcgmi import DcgmiDetail, parse_dcgmi_diag

BORDER = "+---------------------------+------------------------------------------------+"


def row(name: str, value: str) -> str:
    return f"| {name:<25} | {value:<46} |"


def table(*rows: str) -> str:
    head = [BORDER, row("Diagnostic", "Result"), BORDER.replace("-", "="),
            "+-----  Hardware  ----------+------------------------------------------------+"]
    return "\n".join([*head, *rows, BORDER]) + "\n"


def test_each_gpu_row_closes_the_warning_above_it() -> None:
    diag = parse_dcgmi_diag(table(
        row("memory", "Fail"),
        row("", "GPU0: Fail"),
        row("Warning: GPU0", "GPU 0 Thermal violations totaling 13.3 second"),
        row("", "s."),
        row("", "GPU1: Pass"),
    ))
    memory = diag.tests[0]
    assert memory.result == "Fail"
    assert memory.gpu_results == {"Fail": (0,), "Pass": (1,)}
    assert memory.details == (DcgmiDetail("Warning", "GPU 0 Thermal violations totaling 13.3 seconds."),)


def test_a_cpu_entity_counts_toward_the_result_but_is_no_gpu() -> None:
    diag = parse_dcgmi_diag(table(row("cpu_eud", "Pass"), row("", "CPU0: Fail"), row("", "GPU 1: Pass")))
    test = diag.tests[0]
    assert test.result == "Fail"
    assert test.gpu_results == {"Pass": (1,)}


def test_not_run_is_kept_as_printed_never_a_pass() -> None:
    diag = parse_dcgmi_diag(table(row("memory", "Pass"), row("", "GPU0: Pass"), row("", "GPU1: Not Run")))
    test = diag.tests[0]
    assert test.gpu_results == {"Pass": (0,), "Not Run": (1,)}
    assert test.result == "Not Run"


def test_a_result_word_inside_wrapped_text_is_text() -> None:
    diag = parse_dcgmi_diag(table(
        row("pcie", "Warn"),
        row("Warning", "the link of GPU0: Pass was degraded at the tim"),
        row("", "e of the test"),
    ))
    assert diag.tests[0].details[0].text == "the link of GPU0: Pass was degraded at the time of the test"
    assert diag.tests[0].gpu_results == {}


def test_a_name_cell_of_colons_only_is_a_test_row_not_a_crash() -> None:
    """Found by the fuzz test: ``| : | y |`` once raised IndexError instead of reading a row."""
    diag = parse_dcgmi_diag(table(row("memory", "Pass"), row(":", "Fail")))
    assert diag.results == {"memory": "Pass", ":": "Fail"}


def test_a_row_without_its_right_border_is_not_a_full_cell() -> None:
    """A copy cut at the right edge (no closing ``|``): the chunk's length says nothing, so words are not glued."""
    text = table(row("pcie", "Warn"), row("Warning", "x" * 45)[:-2], row("", "tail"))
    assert parse_dcgmi_diag(text).tests[0].details[0].text == "x" * 45 + " tail"
