"""What a policy's name means: the one registry of built-in policy names and
:class:`PolicySpec`, a name parsed once into the value that building a policy
(:func:`mara_agents.policy.make_policy`), the benchmarks' checks and the benchmark store's
fingerprint dispatch on::

    from mara_agents.policy_spec import PolicySpec

    spec = PolicySpec.parse("mara_fair@0.9")      # kind "mara_fair", fraction 0.9
    spec = PolicySpec.parse("mysched:Idle").check()  # imports mysched, builds nothing
    spec.fingerprint()    # "src.<digest of mysched.py>": stored episodes follow the code

Forms: a built-in name (:data:`POLICY_NAMES`), ``name@argument`` (a MARA-fair fraction, a
MARL models folder), or ``package.module:Factory`` (your own scheduler, see
:mod:`mara_agents.policy`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from mara_agents import baselines as _baselines
from mara_agents.marl import ALGORITHMS as MARL
from mara_agents.marl import MODELS_DIR

PEERS = ("las", "successive_halving", "optimus", "slaq", "laira")
"""The schedulers a user would pick instead of MARA (docs/baselines.md, "Peer schedulers")."""

BASELINES = tuple(cls.name for cls in _baselines.TABLE)
"""The baseline schedulers of :mod:`mara_agents.baselines`, in the order of the tables
(their one registry is :data:`mara_agents.baselines.BY_NAME`)."""

FAIR = tuple(cls.name for cls in _baselines.FAIR_AWARE)
"""The fairness-aware schedulers (SPEC §10; not in the default suites' tables, where no
preset has tenants and they equal LARA: the ``fairness`` suite runs them)."""

MARA = "mara"
"""The shipped MARA (``mara_agents/weights/mara_default.pt``)."""

MARA_FAIR = "mara_fair"
"""MARA-fair (SPEC §10): MARA fine-tuned under the constraint that every tenant's completion
rate stays at least a fraction f of the overall rate. ``mara_fair`` is f = 0.8
(:data:`DEFAULT_FAIR_FRACTION`); ``mara_fair@<f>`` another shipped setting
(:data:`FAIR_FRACTIONS`)."""

FAIR_FRACTIONS = (0.6, 0.8, 0.9)
"""The fractions f with a shipped MARA-fair checkpoint (``mara_fair_<f>.pt``)."""

DEFAULT_FAIR_FRACTION = 0.8

POLICY_NAMES = (*BASELINES, *FAIR, MARA, MARA_FAIR, *MARL)
"""Every built-in policy name :func:`make_policy` accepts. The MARL names
(:data:`mara_agents.marl.ALGORITHMS`) run the models ``mara-bench marl`` trained into
``results/marl/models``; ``<name>@<folder>`` runs those of another models folder."""


KINDS = ("baseline", "mara", "mara_fair", "marl", "factory")
"""What a :class:`PolicySpec` names: a baseline of :data:`BASELINES` or :data:`FAIR`, the
shipped MARA, MARA-fair at a fraction, a trained MARL model, or a ``module:Factory``."""


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """A policy's name, parsed once (:meth:`parse`); what :func:`make_policy`, the
    benchmarks' checks and the store's fingerprint dispatch on.

    Forms: a built-in name (``"lara"``), ``name@argument`` (``"mara_fair@0.9"``: a
    fraction of :data:`FAIR_FRACTIONS`; ``"mappo@<folder>"``: that models folder;
    ``"mappo@<file>.pt"``: that model file), or
    ``"package.module:Factory"``.
    """

    text: str
    """The spec as typed (the policy's name in tables and stored results)."""
    kind: str
    """One of :data:`KINDS`."""
    name: str
    """The built-in name (the part before ``@``), or ``package.module:Factory``."""
    argument: str | None = None
    """The text after ``@`` (None without one)."""

    @classmethod
    def parse(cls, text: Any) -> PolicySpec:
        """``text`` parsed (a spec is returned as it is); nothing is imported or built.

        Raises:
            ValueError: not a string, an unknown name, a built-in name with a wrong ``@``
                argument, or not of the form ``package.module:Factory``.
        """
        if isinstance(text, PolicySpec):
            return text
        if not isinstance(text, str):
            raise ValueError(f"policy: expected a name or 'package.module:Factory', got "
                             f"{text!r}")
        if text in BASELINES or text in FAIR:
            return cls(text, "baseline", text)
        if text == MARA:
            return cls(text, "mara", text)
        name, sep, argument = text.partition("@")
        if name == MARA_FAIR:
            spec = cls(text, "mara_fair", name, argument if sep else None)
            spec.fraction  # noqa: B018 - checks the argument
            return spec
        if name in MARL:
            if sep and not argument:
                raise ValueError(f"policy {text!r}: expected a models folder after '@'")
            return cls(text, "marl", name, argument if sep else None)
        if sep and name in POLICY_NAMES:
            raise ValueError(f"policy {text!r}: {name} takes no '@' argument")
        module, sep, attr = text.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"policy {text!r}: expected a built-in name (one of "
                             f"{', '.join(POLICY_NAMES)}) or 'package.module:Factory'")
        return cls(text, "factory", text)

    def __str__(self) -> str:
        return self.text

    @property
    def fraction(self) -> float:
        """MARA-fair's fraction f (:data:`DEFAULT_FAIR_FRACTION` without ``@``).

        Raises:
            ValueError: not a MARA-fair spec, or an f that is not a number in (0, 1]."""
        if self.kind != "mara_fair":
            raise ValueError(f"policy {self.text!r}: only {MARA_FAIR} has a fraction")
        if self.argument is None:
            return DEFAULT_FAIR_FRACTION
        try:
            return check_fraction(float(self.argument))
        except ValueError:
            raise ValueError(f"policy {self.text!r}: fraction: expected a number in (0, 1] "
                             f"after '@', got {self.argument!r}") from None

    @property
    def models(self) -> Path:
        """A MARL spec's models folder (:data:`mara_agents.marl.MODELS_DIR` without ``@``),
        or one model file (``mappo@<file>.pt``: that model, whatever the preset)."""
        if self.kind != "marl":
            raise ValueError(f"policy {self.text!r}: only MARL names have a models folder")
        return MODELS_DIR if self.argument is None else Path(self.argument)

    @property
    def per_preset(self) -> bool:
        """Whether what it builds depends on the preset id beyond the env's layout (a MARL
        name runs the model trained on that preset)."""
        return self.kind == "marl"

    def factory(self) -> Any:
        """The callable of a ``module:Factory`` spec (the current directory is on the import
        path, as with ``python -m``).

        Raises:
            ValueError: another kind, a module that does not import, or no callable of
                that name (the message says which)."""
        if self.kind != "factory":
            raise ValueError(f"policy {self.text!r}: a built-in name has no factory")
        module_name, _, attr = self.text.partition(":")
        factory: Any = self._module()
        for part in attr.split("."):
            factory = getattr(factory, part, None)
            if factory is None:
                raise ValueError(f"policy {self.text!r}: {module_name} has no {attr!r}")
        if not callable(factory):
            raise ValueError(f"policy {self.text!r}: {attr} is not callable")
        return factory

    def _module(self) -> Any:
        module_name = self.text.partition(":")[0]
        if os.getcwd() not in sys.path and "" not in sys.path:  # as `python -m` would
            sys.path.insert(0, os.getcwd())
        try:
            return importlib.import_module(module_name)
        except ImportError as e:
            raise ValueError(f"policy {self.text!r}: cannot import {module_name!r} ({e}); "
                             f"is it on the Python path?") from e

    def check(self) -> PolicySpec:
        """This spec, once its factory resolves (for ``module:Factory``; nothing is built).

        Raises:
            ValueError: what :meth:`factory` raises."""
        if self.kind == "factory":
            self.factory()
        return self

    def fingerprint(self) -> str | None:
        """What decides this policy's actions beyond its name, or None for code shipped
        with the package alone (the benchmark store keys stored episodes by it).

        ``mara``, ``mara_fair``: the first 16 hex digits of SHA-256 of the checkpoint file.
        A MARL name: of its models' files (None without any). ``module:Factory``:
        ``src.<digest of the module's source file>``, followed by ``+<fingerprint>`` when
        the factory has a ``fingerprint`` attribute (a string, or a callable returning
        one), e.g. the digest of the weights it loads.

        Raises:
            ValueError: a factory's ``fingerprint`` that is not a string.
        """
        if self.kind == "mara":
            from mara_agents.mat.checkpoint import shipped

            return file_fingerprint(shipped())
        if self.kind == "mara_fair":
            return file_fingerprint(fair_checkpoint(self.fraction))
        if self.kind == "marl":
            if self.models.is_file():
                return file_fingerprint(self.models)
            from mara_agents.marl import SHIPPED_MODELS

            files = sorted(self.models.glob(f"*/{self.name}-seed0.pt"))
            if self.argument is None:
                files += sorted(SHIPPED_MODELS.glob(f"*/{self.name}.pt"))
            return file_fingerprint(*files) if files else None
        if self.kind == "baseline":
            return None
        factory = self.factory()
        source = getattr(self._module(), "__file__", None)
        parts = [f"src.{file_fingerprint(source)}"] if source else []
        mark = getattr(factory, "fingerprint", None)
        value = mark() if callable(mark) else mark
        if value is not None and not isinstance(value, str):
            raise ValueError(f"policy {self.text!r}: fingerprint must be a string, got "
                             f"{value!r}")
        return "+".join(parts + ([value] if value else [])) or None


def policy_fingerprint(spec: str | PolicySpec) -> str | None:
    """:meth:`PolicySpec.fingerprint` of a spec."""
    return PolicySpec.parse(spec).fingerprint()


def file_fingerprint(*paths: Any) -> str:
    """The first 16 hex digits of SHA-256 over the bytes of ``paths`` (in order)."""
    digest = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def check_policy_spec(spec: Any) -> str:
    """The text of ``spec`` if it names a built-in policy or an importable
    ``module:Factory`` (:meth:`PolicySpec.check`), else a ``ValueError``."""
    return PolicySpec.parse(spec).check().text


def marl_spec(spec: str) -> tuple[str, Path] | None:
    """``(algorithm, models folder)`` of a MARL spec, else None (see :class:`PolicySpec`)."""
    try:
        parsed = PolicySpec.parse(spec)
    except ValueError:
        return None
    return (parsed.name, parsed.models) if parsed.kind == "marl" else None


def fair_spec(spec: str) -> float | None:
    """The fraction f of a MARA-fair spec, else None (:attr:`PolicySpec.fraction`)."""
    parsed = PolicySpec.parse(spec) if spec.partition("@")[0] == MARA_FAIR else None
    return parsed.fraction if parsed is not None else None


def resolve_factory(spec: str) -> Any:
    """The callable of a ``module:Factory`` spec (:meth:`PolicySpec.factory`)."""
    return PolicySpec.parse(spec).factory()


def check_fraction(fraction: Any) -> float:
    """``fraction`` as a float if it is a number in (0, 1], else ``ValueError``."""
    if (isinstance(fraction, bool) or not isinstance(fraction, (int, float))
            or not 0 < fraction <= 1):
        raise ValueError(f"fraction: expected a number in (0, 1], got {fraction!r}")
    return float(fraction)


def fair_checkpoint(fraction: float) -> Path:
    """The shipped MARA-fair checkpoint of a fraction.

    Raises:
        ValueError: no checkpoint is shipped for it (the message lists those that are and
            how to train one)."""
    from mara_agents.mat.checkpoint import shipped

    fraction = check_fraction(fraction)
    if fraction not in FAIR_FRACTIONS:
        raise ValueError(f"fraction: no MARA-fair checkpoint is shipped for {fraction} "
                         f"(shipped: {', '.join(map(str, FAIR_FRACTIONS))}); train one with "
                         f"`mara-train --preset CoRE-Tenants-v0 --fair-fraction {fraction} "
                         f"--init {shipped()} --lr 3e-4 --ent-coef 0.01 --env-steps 600000 "
                         f"--members 1` and pass checkpoint=<its last.pt>")
    return shipped(f"mara_fair_{fraction}.pt")
