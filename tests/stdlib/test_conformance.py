"""WPT conformance targets, measured inside a real isolate (see docs/conformance.md)."""

from __future__ import annotations

import os

import pytest

from codemode.conformance import FILE_NAMES, FileResult, conformance_dir, run_all

TARGETS = {
    "url/resources/urltestdata.json": 99.0,
    "url/resources/urltestdata-javascript-only.json": 100.0,
    "url/resources/setters_tests.json": 99.0,
    "url/resources/toascii.json": 99.0,
    "url/resources/IdnaTestV2.json": 99.0,
    "url/resources/percent-encoding.json": 100.0,
    "fetch/data-urls/resources/base64.json": 100.0,
    "fetch/data-urls/resources/data-urls.json": 100.0,
    "whatwg-encoding/encodings.json": 100.0,
    "whatwg-encoding/indexes.json": 100.0,
}


@pytest.fixture(scope="module")
def results() -> dict[str, FileResult]:
    root = conformance_dir()
    if root is None:
        if os.environ.get("CI") == "true":
            pytest.fail("conformance data is absent in CI: set CODEMODE_CONFORMANCE_DIR")
        pytest.skip("conformance data not found (../shared/conformance or CODEMODE_CONFORMANCE_DIR)")
    return {r.name: r for r in run_all(root)}


def test_every_file_has_a_target() -> None:
    assert set(TARGETS) == set(FILE_NAMES)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target(results: dict[str, FileResult], name: str) -> None:
    result = results[name]
    assert result.total > 0
    assert result.percent >= TARGETS[name], (result.percent, result.failures)


def test_replacement_labels_throw_range_error(results: dict[str, FileResult]) -> None:
    note = results["whatwg-encoding/encodings.json"].note
    done, _, rest = note.partition(" of ")
    assert done == rest.split()[0], note
