"""core_env.pmath: portable elementwise math (accuracy, special values, both backends give the
same bits, and no outcome-deciding module calls a platform-dependent function)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from core_env import pmath

ROOT = Path(__file__).resolve().parents[2]

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 5e-324, 2.2e-308, 709.78,
                    709.79, -708.39, -708.4, -745.2, 1e-300, 1e300, -1e300, 0.5, 2.0, 1e-17,
                    -1e-17, -0.999999, -1.0000001])


def _inputs(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([SPECIAL, rng.uniform(-800, 800, 20000), rng.uniform(-3, 3, 20000),
                           np.exp(rng.uniform(-700, 700, 20000)), rng.uniform(-1.5, 50, 20000),
                           rng.uniform(-1e-6, 1e-6, 5000)])


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.spacing(np.abs(want))


REFERENCE = {"exp": math.exp, "log": math.log, "log1p": math.log1p, "expm1": math.expm1}
DOMAIN = {"exp": (-700.0, 700.0), "log": (1e-300, 1e300), "log1p": (-0.999, 1e300),
          "expm1": (-700.0, 700.0)}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_accurate_to_about_one_ulp(name):
    """Against the C library (itself within about 0.5 ULP): at most 1 ULP apart for exp and
    log, 2 for log1p and expm1, and nearly always equal."""
    xs = _inputs(1)
    lo, hi = DOMAIN[name]
    xs = xs[(xs >= lo) & (xs <= hi)]
    got = np.asarray(getattr(pmath, name)(xs))
    want = np.array([REFERENCE[name](float(v)) for v in xs])
    u = _ulps(got, want)
    assert u.max() <= (1.0 if name in ("exp", "log") else 2.0), (name, xs[u.argmax()])
    assert np.mean(u == 0) > 0.7


def test_pow_matches_the_c_library():
    rng = np.random.default_rng(2)
    x = np.exp(rng.uniform(-20, 20, 20000))
    y = rng.uniform(-4, 4, 20000)
    got = pmath.pow(x, y)
    want = np.array([a ** b for a, b in zip(x.tolist(), y.tolist(), strict=False)])
    assert (_ulps(got, want) <= 4 + np.abs(y * np.log(x))).all()


@pytest.fixture
def quiet():
    """Special values may raise numpy's "invalid value" warning (as np.log(-1) does)."""
    with np.errstate(all="ignore"):
        yield


def test_special_values(quiet):
    nan, inf = np.nan, np.inf
    np.testing.assert_array_equal(pmath.exp([nan, inf, -inf, 710.0, -709.0, 0.0]),
                                  [nan, inf, 0.0, inf, 0.0, 1.0])
    np.testing.assert_array_equal(pmath.log([0.0, -1.0, inf, nan, 1.0]),
                                  [-inf, nan, inf, nan, 0.0])
    np.testing.assert_array_equal(pmath.log1p([-1.0, -2.0, inf, 0.0, nan]),
                                  [-inf, nan, inf, 0.0, nan])
    np.testing.assert_array_equal(pmath.expm1([inf, -inf, 0.0, 800.0, -800.0, nan]),
                                  [inf, -1.0, 0.0, inf, -1.0, nan])
    np.testing.assert_array_equal(pmath.pow([0.0, 0.0, 0.0, 4.0, -1.0, inf, 1.0],
                                            [1.0, 0.0, -1.0, 0.5, 2.0, 0.0, 7.0]),
                                  [0.0, 1.0, inf, 2.0, nan, 1.0, 1.0])
    assert pmath.log(1.0) == 0.0 and pmath.exp(0.0) == 1.0
    assert pmath.sigmoid(-800.0) == 0.0 and pmath.sigmoid(800.0) == 1.0
    assert pmath.softplus(800.0) == 800.0 and pmath.softplus(-800.0) == 0.0


def test_scalars_and_arrays_of_any_length_give_the_same_bits(quiet):
    xs = _inputs(3)[:4099] * 0.01
    whole = pmath.exp(xs)
    assert all(pmath.exp(float(v)) == w or np.isnan(w) for v, w in zip(xs[:500], whole[:500], strict=False))
    for n in (1, 7, 64, 4096, 4097):
        part = pmath.log1p(xs[:n])
        np.testing.assert_array_equal(part, pmath.log1p(xs)[:n])
    strided = pmath.log(np.abs(xs[::3]) + 1.0)
    np.testing.assert_array_equal(strided, pmath.log(np.abs(xs) + 1.0)[::3])


def test_log_whole_equals_log():
    k = np.arange(1, 4097)
    np.testing.assert_array_equal(pmath.log_whole(k), pmath.log(k.astype(float)))
    with pytest.raises(ValueError, match="whole numbers in"):
        pmath.log_whole([0, 3])


def test_rowsum_is_left_to_right_and_ignores_padding():
    a = np.array([[1e16, 1.0, -1e16, 1.0]])
    assert pmath.rowsum(a)[0] == ((1e16 + 1.0) - 1e16) + 1.0
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 37))
    padded = np.concatenate([x, np.zeros((5, 91))], axis=1)
    np.testing.assert_array_equal(pmath.rowsum(x), pmath.rowsum(padded))
    assert pmath.rowsum(np.zeros((3, 0))).shape == (3,)


def test_interp_matches_numpy_semantics():
    xp = np.array([0.0, 1.0, 3.0, 4.0])
    fp = np.array([2.0, 0.0, 1.0, -1.0])
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.5, 4.0, 9.0])
    np.testing.assert_allclose(pmath.interp(x, xp, fp), np.interp(x, xp, fp), rtol=0, atol=1e-15)


@pytest.mark.skipif(pmath.BACKEND != "numba", reason="numba is not installed")
@pytest.mark.parametrize("name", ["exp", "log", "log1p", "expm1", "sigmoid", "softplus"])
def test_the_compiled_and_the_numpy_backends_give_the_same_bits(name):
    xs = _inputs(5)
    with np.errstate(all="ignore"):
        a = getattr(pmath, name)(xs)
        b = getattr(pmath.NUMPY_KERNELS, name)(xs)
    np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(pmath.BACKEND != "numba", reason="numba is not installed")
def test_the_compiled_and_the_numpy_pow_give_the_same_bits():
    x, y = np.meshgrid(SPECIAL, SPECIAL)
    rng = np.random.default_rng(6)
    x = np.concatenate([x.ravel(), np.exp(rng.uniform(-30, 30, 20000))])
    y = np.concatenate([y.ravel(), rng.uniform(-5, 5, 20000)])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(pmath.pow(x, y), pmath.NUMPY_KERNELS.pow(x, y))


@pytest.mark.skipif(pmath.BACKEND != "numba", reason="numba is not installed")
def test_the_compiled_scalar_functions_equal_their_python_source():
    from core_env import _pmath_numba as nb

    xs = _inputs(7)[::37]
    for fn in (nb.exp_scalar, nb.log_scalar, nb.log1p_scalar, nb.expm1_scalar,
               nb.sigmoid_scalar, nb.softplus_scalar):
        compiled = np.array([fn(float(v)) for v in xs])
        python = np.array([fn.py_func(float(v)) for v in xs])
        np.testing.assert_array_equal(compiled, python)


# --- the rule: outcome-deciding code uses core_env.pmath ---------------------------------

FORBIDDEN = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "power", "float_power",
             "sin", "cos", "tan", "tanh", "sinh", "cosh", "arcsin", "arccos", "arctan",
             "arctan2", "logaddexp", "logaddexp2", "cbrt", "interp", "dot", "matmul", "inner",
             "vdot", "tensordot", "einsum", "linalg", "pow", "lgamma", "erf", "erfc", "gamma"}
"""numpy and math functions whose bits depend on the CPU, the C library or the array length
(or, for dot products, the BLAS kernel)."""

CHECKED = sorted({*ROOT.glob("core_env/**/*.py"), *ROOT.glob("mara_agents/baselines/*.py")}
                 - {ROOT / "core_env" / "pmath.py", ROOT / "core_env" / "_pmath_numba.py"}
                 - set(ROOT.glob("core_env/live/*.py")))
"""The simulator, the forecasters and the numpy baselines. Not the live runtime: its jobs are
real training (BLAS matrix products) whose losses are measured, not computed by the
simulator, and are the same for a seed on one machine only."""


def violations(source: str) -> list[str]:
    """``np.<f>``, ``numpy.<f>`` and ``math.<f>`` uses of :data:`FORBIDDEN` functions, ``@``,
    and ``**`` with an exponent other than the literal 2 (squaring is exact)."""
    bad = []
    for node in sorted(ast.walk(ast.parse(source)), key=lambda n: getattr(n, "lineno", 0)):
        if (isinstance(node, ast.Attribute) and node.attr in FORBIDDEN
                and isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy",
                                                                          "math")):
            bad.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            bad.append(f"line {node.lineno}: @")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and not (
                isinstance(node.right, ast.Constant) and node.right.value == 2):
            bad.append(f"line {node.lineno}: **")
    return bad


def test_the_rule_detects_platform_dependent_calls():
    src = "import numpy as np\nimport math\na = np.exp(x)\nb = x ** 0.5\nc = x @ y\n" \
          "d = math.log(2)\ne = x ** 2\nf = np.linalg.solve(a, b)\n"
    assert [v.split(": ")[1] for v in violations(src)] == ["np.exp", "**", "@", "math.log",
                                                          "np.linalg"]


@pytest.mark.parametrize("path", CHECKED, ids=[str(p.relative_to(ROOT)) for p in CHECKED])
def test_outcome_deciding_code_uses_portable_math(path):
    assert violations(path.read_text()) == [], (
        f"{path.relative_to(ROOT)}: use core_env.pmath (see its docstring) instead")
