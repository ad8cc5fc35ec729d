"""docs/baselines.md agrees with the code: its examples run, every policy and every LARA
parameter is documented."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from mara_agents.baselines import BY_NAME, LARAParams
from mara_agents.policy import BASELINES as POLICY_NAMES
from mara_agents.policy import PEERS

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


@pytest.mark.parametrize("peer", PEERS)
def test_every_peer_parameter_and_default_is_documented(peer):
    text = DOC.read_text()
    params = list(inspect.signature(BY_NAME[peer].__init__).parameters.values())[2:]
    for p in params:
        default = repr(p.default).replace("'", '"')
        assert re.search(rf"\| `{peer}` \| `{p.name}` \| `?{re.escape(default)}`? \|", text), (
            f"{peer}.{p.name}: no row with its default {default} in docs/baselines.md")


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S))
def test_python_examples_run(block):
    exec(compile(block, str(DOC), "exec"), {})
