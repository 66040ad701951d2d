"""Every suite shipped in eval/ loads and validates on a fresh checkout, or - where a row needs a file the user
builds first (steer vectors, a learned gate) - stops before any model loads with an error naming the file and
the command that builds it."""

from __future__ import annotations

import pytest

from mlft.errors import ConfigError
from mlft.evals.suite import available_suites, load_suite

NEEDS_A_BUILT_FILE = {"mitigation_outside_lcb", "mitigation_steer", "steer_sweep", "grpo_spread"}
# suites on data a user fetches (../shared holds it for CI; a clone without it has none)
NEEDS_FETCHED_DATA = {
    "multisense": "mlft data multisense",
    "multisense_quick": "mlft data multisense",
    "polyglot": "mlft data polyglot",
    "polyglot_quick": "mlft data polyglot",
}


@pytest.mark.parametrize("name", available_suites())
def test_shipped_suite_loads_or_names_the_file_to_build(name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # vectors/ and gates/ are relative to the working directory: none here
    if name in NEEDS_FETCHED_DATA:
        try:
            assert load_suite(name).name
        except ConfigError as e:  # without the data: the error names the command that fetches it
            assert NEEDS_FETCHED_DATA[name] in str(e)
        return
    if name not in NEEDS_A_BUILT_FILE:
        assert load_suite(name).name
        return
    with pytest.raises(ConfigError) as e:
        load_suite(name)
    assert "not found" in str(e.value) and any(
        cmd in str(e.value) for cmd in ("mlft build steer", "mlft build gate", "mlft data mix MIX.yaml --out")
    )


def test_the_dependent_suites_are_the_only_ones():
    assert NEEDS_A_BUILT_FILE <= set(available_suites())
