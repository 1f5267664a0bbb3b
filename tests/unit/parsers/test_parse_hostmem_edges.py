"""Edges of burnin.parsers.hostmem that planted bugs slipped through (bench/mutants on burnin/parsers/hostmem.py).

../shared holds no meminfo or THP file (see test_parse_hostmem.py); the texts below
follow the kernel's layouts as that file describes them. Each test pins one decision:
the most modes a choice list may hold (16), a half-bracketed word beside a valid
active mode, the smallest hugepage size, and the excerpt a bad pool name is quoted by.
"""

from __future__ import annotations

import pytest

from burnin.errors import ParseError
from burnin.parsers.hostmem import hugepage_size_kib, parse_kernel_choice

MODES = [f"mode{'abcdefghijklmnopq'[i]}" for i in range(17)]


def test_a_choice_list_of_16_modes_is_read() -> None:
    text = " ".join(["[always]", *MODES[:15]])
    setting = parse_kernel_choice(text)
    assert setting.active == "always" and len(setting.choices) == 16


def test_a_choice_list_of_17_modes_is_not_a_setting() -> None:
    with pytest.raises(ParseError, match="not a list of modes"):
        parse_kernel_choice(" ".join(["[always]", *MODES[:16]]))


@pytest.mark.parametrize("text", ["[always] madvise never]", "[always] [madvise never"])
def test_a_half_bracketed_word_beside_the_active_mode_is_refused(text: str) -> None:
    with pytest.raises(ParseError, match="exactly one mode in brackets"):
        parse_kernel_choice(text)


def test_the_smallest_hugepage_size_is_one_kib() -> None:
    assert hugepage_size_kib("hugepages-1kB") == 1


def test_a_bad_pool_name_is_quoted_by_its_first_80_characters() -> None:
    name = "hugepages-" + "9" * 70 + "MB-and-more"
    with pytest.raises(ParseError) as caught:
        hugepage_size_kib(name)
    assert caught.value.excerpt == name[:80] and len(caught.value.excerpt) == 80
