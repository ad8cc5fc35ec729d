"""docs/baselines.md agrees with the code: its examples run, every policy and every LARA
parameter is documented."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from mara_agents.baselines import LARAParams
from mara_agents.policy import BASELINES as POLICY_NAMES

DOC = Path(__file__).resolve().parents[3] / "docs" / "baselines.md"


def test_every_policy_and_lara_parameter_is_documented():
    text = DOC.read_text()
    for name in POLICY_NAMES:
        assert f"`{name}`" in text, name
    for f in dataclasses.fields(LARAParams):
        assert f"`{f.name}`" in text, f.name
        default = repr(f.default).replace("'", '"')
        assert re.search(rf"\| `{f.name}` \| `?{re.escape(default)}`? \|", text), (
            f"{f.name}: the documented default is not {default}")


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S))
def test_python_examples_run(block):
    exec(compile(block, str(DOC), "exec"), {})
