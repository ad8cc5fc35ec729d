"""Safe loading (SPEC §5: checkpoints load with ``torch.load(weights_only=True)``).

Checkpoints never execute code on load: a crafted malicious pickle (shown to run its payload
under a plain unpickler) is refused with a clear error and the payload does not run;
truncated or corrupted files give a ``ValueError`` naming the file; and a static scan keeps
``pickle`` loads, ``torch.load`` without ``weights_only=True`` and ``np.load(...,
allow_pickle=True)`` out of the packages (so data banks added later stay pickle-free).
"""

from __future__ import annotations

import ast
import pickle
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from mara_agents.forecast.forecaster import (  # noqa: E402
    CHECKPOINT_DIR,
    DEFAULT_CHECKPOINT,
    FlowMatchingForecaster,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core_env", "mara_agents", "benchmarks")
SHIPPED = CHECKPOINT_DIR / f"{DEFAULT_CHECKPOINT}.pt"


class Payload:
    """Unpickling this object runs ``exec``, which writes a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


def _refused(path: Path) -> str:
    with pytest.raises(ValueError) as err:
        FlowMatchingForecaster.load(path)
    assert str(path) in str(err.value), f"the error must name the file: {err.value}"
    return str(err.value)


@pytest.mark.parametrize("container", ["torch-zip", "torch-legacy", "plain-pickle"])
def test_a_malicious_pickle_is_refused_and_never_runs(tmp_path, container):
    marker = tmp_path / "payload_ran"
    good = torch.load(SHIPPED, weights_only=True)
    evil = {**good, "extra": Payload(marker)}
    path = tmp_path / "evil.pt"
    if container == "torch-zip":
        torch.save(evil, path)
    elif container == "torch-legacy":
        torch.save(evil, path, _use_new_zipfile_serialization=False)
    else:
        path.write_bytes(pickle.dumps(evil))
    # control: the file really is malicious, an unsafe load runs the payload
    if container == "plain-pickle":
        pickle.loads(path.read_bytes())
    else:
        torch.load(path, weights_only=False)
    assert marker.exists()
    marker.unlink()
    msg = _refused(path)
    assert not marker.exists(), "loading the checkpoint executed code"
    if container == "torch-zip":
        assert "refused" in msg and "exec" in msg


@pytest.mark.parametrize("fraction", [0.0, 0.001, 0.25, 0.5, 0.9, 0.999])
def test_a_truncated_checkpoint_names_the_file(tmp_path, fraction):
    data = SHIPPED.read_bytes()
    path = tmp_path / "truncated.pt"
    path.write_bytes(data[: int(len(data) * fraction)])
    _refused(path)


def test_a_corrupted_record_anywhere_names_the_file_and_the_record(tmp_path):
    """One flipped byte inside every record of the archive (the pickle, each tensor's data,
    the metadata): ``torch.load`` alone loads flipped tensor bytes silently; the CRC check
    must catch them all."""
    data = SHIPPED.read_bytes()
    with zipfile.ZipFile(SHIPPED) as z:
        infos = [i for i in z.infolist() if i.file_size > 0]
        offsets = []
        for info in infos:  # data starts after the local header (30 bytes + name + extra)
            header = data[info.header_offset: info.header_offset + 30]
            name_len = int.from_bytes(header[26:28], "little")
            extra_len = int.from_bytes(header[28:30], "little")
            start = info.header_offset + 30 + name_len + extra_len
            offsets.append((info.filename, start + info.file_size // 2))
    assert len(offsets) >= 10
    for name, offset in offsets:
        bad = bytearray(data)
        bad[offset] ^= 0x01
        path = tmp_path / "corrupt.pt"
        path.write_bytes(bytes(bad))
        msg = _refused(path)
        assert name in msg or "corrupt" in msg, msg


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"PK\x03\x04" + b"\0" * 64,
                                     b"\x80\x04K\x01."])
def test_garbage_files_name_the_file(tmp_path, content):
    path = tmp_path / "garbage.pt"
    path.write_bytes(content)
    _refused(path)


def test_the_shipped_checkpoint_still_loads_and_matches_its_tensors():
    fm = FlowMatchingForecaster.load(SHIPPED)
    raw = torch.load(SHIPPED, weights_only=True)["state_dict"]
    for key, value in fm.net.state_dict().items():
        assert torch.equal(value, raw[key].to(value.dtype)), key


# ----------------------------------------------------------------------------- static scan
def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = (f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute)
                    and isinstance(f.value, ast.Name) else getattr(f, "id", None))
            yield name, node


def _kw(node: ast.Call, name: str):
    for kw in node.keywords:
        if kw.arg == name:
            return kw.value
    return None


def unsafe_loads(source: str, filename: str) -> list[str]:
    """Calls that can execute code from a file: pickle loads, ``torch.load`` without a
    literal ``weights_only=True``, ``np.load`` with ``allow_pickle`` not literally False."""
    found = []
    for name, node in _calls(ast.parse(source, filename)):
        where = f"{filename}:{node.lineno}"
        if name in ("pickle.load", "pickle.loads", "pickle.Unpickler", "dill.load",
                    "joblib.load", "yaml.load", "marshal.load", "marshal.loads"):
            found.append(f"{where}: {name}")
        elif name == "torch.load":
            wo = _kw(node, "weights_only")
            if not (isinstance(wo, ast.Constant) and wo.value is True):
                found.append(f"{where}: torch.load without weights_only=True")
        elif name in ("np.load", "numpy.load"):
            ap = _kw(node, "allow_pickle")
            if ap is not None and not (isinstance(ap, ast.Constant) and ap.value is False):
                found.append(f"{where}: np.load with allow_pickle")
    return found


def test_the_scanner_flags_unsafe_loads():
    bad = ("import pickle, torch, numpy as np\n"
           "pickle.load(f)\ntorch.load(p)\ntorch.load(p, weights_only=False)\n"
           "np.load(p, allow_pickle=True)\n")
    good = "import torch, numpy as np\ntorch.load(p, weights_only=True)\nnp.load(p)\n"
    assert len(unsafe_loads(bad, "bad.py")) == 4
    assert unsafe_loads(good, "good.py") == []


def test_no_package_loads_files_unsafely():
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    assert len(files) > 20
    found = [hit for p in files for hit in unsafe_loads(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "unsafe loads:\n" + "\n".join(found)
