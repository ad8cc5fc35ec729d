"""Distil an ensemble of MARA checkpoints into one MAT: ``mara-distill`` (docs/mara.md).

    mara-distill --teacher a.pt,b.pt,c.pt --student a.pt --out runs/distill

An ensemble of MATs (several ``mara-train`` runs) schedules better than any of its members
but costs several MATs at inference. Distillation trains one MAT (the *student*, initialised
from a trained checkpoint) to act like the ensemble (the *teacher*), so it costs one MAT.

DAgger (Ross et al. 2011) on the student's own states: iteration i runs the batched
environments for ``steps`` slots executing the student's greedy action (the way MARA is
deployed), and labels every visited state with the teacher's greedy joint action and, at
every node position along it, the teacher's distribution over the K + 1 actions (the
softmax of the members' mean masked score given the teacher's earlier choices, sharpened by
:data:`TEMPERATURE`: what greedy ensemble decoding takes the argmax of).
Then ``updates`` minibatch steps on the aggregated states (the last ``buffer`` of them)
minimise the student's teacher-forced KL divergence from the teacher's distributions,
summed over node positions: the student is scored along the teacher's joint action with
the same conditioning and sequential masks, so matching these distributions makes the
student's greedy decoding reproduce the teacher's.

The value head is not trained (distillation does not use it). The output checkpoint is
the student's, with its weights replaced and a ``distill`` record (this config, the
per-iteration history, seconds); it loads wherever a ``mara-train`` checkpoint does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

import core_env
from core_env.utils.checks import check_ints
from core_env.utils.dataclass_cli import parse_config
from mara_agents.forecast.registry import make_forecaster
from mara_agents.mat.checkpoint import load_checkpoint, model_from_checkpoint, shipped
from mara_agents.mat.ensemble import ensemble_act
from mara_agents.mat.inputs import index_inputs, stack_inputs
from mara_agents.mat.mara_policy import checkpoint_forecaster
from mara_agents.mat.model import MAT, Inputs
from mara_agents.safe_io import save
from mara_agents.train.config import DistillStage
from mara_agents.train.rollout import Rollout

TEMPERATURE = 0.1
"""Temperature of the teacher's distributions: the targets are the softmax of the members'
mean score divided by it (below 1 sharpens them towards the teacher's greedy choice, which
is what deployment decodes)."""


@dataclass(frozen=True)
class DistillConfig(DistillStage):
    """Everything a distillation run depends on (stored in its checkpoint): the training
    settings of :class:`~mara_agents.train.config.DistillStage` and what to distil."""

    teacher: str = ""
    """The ensemble to imitate: checkpoint files separated by commas."""
    student: str = "mara"
    """The checkpoint to start from: ``mara`` (the shipped default) or a file. It must read
    the teacher's forecast columns."""
    preset: str = "CoRE-v0"
    """Environment preset whose states are visited."""
    seed: int = 0
    """Seeds the environments and the torch generator."""
    threads: int = 1
    """torch CPU threads (0: torch's default)."""
    out: str = "runs/distill"
    """Output folder: ``last.pt`` (after every iteration) and ``history.json``."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.preset not in core_env.PRESETS:
            raise ValueError(f"preset: expected one of {sorted(core_env.PRESETS)}, "
                             f"got {self.preset!r}")
        check_ints(self, ("seed", "threads"), 0)


def resolve(spec: str) -> list[Path]:
    """Checkpoint files of ``mara`` (the shipped default) or of comma-separated paths."""
    if spec == "mara":
        return [shipped()]
    return [Path(p) for p in spec.split(",") if p]


def shown(path: Path) -> str:
    """A checkpoint path as recorded: relative to the folder that holds the package for the
    shipped file (``mara_agents/weights/...``), else as given."""
    root = shipped().parents[2]  # the folder that holds mara_agents/
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def distill_loss(student: MAT, x: Inputs, actions: torch.Tensor, target_logp: torch.Tensor
                 ) -> torch.Tensor:
    """Mean over states of the summed per-position KL(teacher || student), the student
    scored teacher-forced along ``actions`` int64[B, N]; ``target_logp`` float[B, N, K+1]
    the teacher's log-probs along the same actions (masked actions: probability 0)."""
    logits, _ = student.forced_logits(x, actions)
    logq = torch.log_softmax(logits, dim=-1)
    p = target_logp.exp()
    kl = (p * (target_logp - logq)).sum(-1)
    return kl.sum(-1).mean()


def counts(actions: torch.Tensor, k1: int) -> torch.Tensor:
    """int64[B, K+1] nodes per action (idle first) of joint actions int64[B, N]."""
    return torch.nn.functional.one_hot(actions, k1).sum(1)


def teacher_targets(models: Sequence[MAT], x: Inputs, actions: torch.Tensor | None = None,
                    temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """A joint action int64[B, N] (``actions``, or the ensemble's greedy one) and the
    ensemble's log-probs float[B, N, K+1] at every position along it (log-softmax of the
    members' mean masked logits, divided by ``temperature``, given the action's earlier
    choices)."""
    with torch.no_grad():
        if actions is None:
            actions = ensemble_act(list(models), x, deterministic=True)
        mean = torch.stack([m.forced_logits(x, actions)[0] for m in models]).mean(0)
        return actions, torch.log_softmax(mean / temperature, dim=-1)


class Distiller:
    """One distillation run (see the module docstring); :meth:`run` trains it."""

    def __init__(self, cfg: DistillConfig, forecaster: Any | None = None) -> None:
        self.cfg = cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.teacher_files = resolve(cfg.teacher)
        if not self.teacher_files:
            raise ValueError(f"teacher: expected checkpoint files separated by commas, got "
                             f"{cfg.teacher!r}")
        student = resolve(cfg.student)
        if len(student) != 1:
            raise ValueError(f"student: expected one checkpoint, got {cfg.student!r}")
        self.student_file = student[0]
        forecast = checkpoint_forecaster([*self.teacher_files, self.student_file])
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.forecaster = (make_forecaster(*forecast) if forecaster is None else forecaster)
        self.blob = load_checkpoint(self.student_file)
        # the student keeps its training placement (train_config is saved with it)
        self.rollout = Rollout(core_env.make_config(cfg.preset), cfg.num_envs, self.forecaster,
                               self.blob["train_config"].get("placement", "model"))
        self.layout = self.rollout.layout
        self.teachers = [model_from_checkpoint(load_checkpoint(p), self.layout, str(p))
                         for p in self.teacher_files]
        for p, m in zip(self.teacher_files, self.teachers, strict=False):
            if not m.config.autoregressive:
                raise ValueError(f"teacher: {p} is a MAT-Dec (non-autoregressive) checkpoint")
        self.student = model_from_checkpoint(self.blob, self.layout, str(self.student_file))
        self.opt = torch.optim.Adam(self.student.parameters(), lr=cfg.lr, eps=1e-5)
        self.history: list[dict[str, Any]] = []
        self.out = Path(cfg.out)
        self.rollout.reset(cfg.seed)

    def collect(self) -> tuple[list[Inputs], list[torch.Tensor], list[torch.Tensor],
                               dict[str, Any]]:
        """One iteration's states with the teacher's labels; agreement and finished
        episodes' completion rates."""
        xs, acts, targets, finished = [], [], [], []
        agree = total = same = 0
        k1 = self.layout.n_slots + 1
        self.student.eval()
        for _ in range(self.cfg.steps):
            x = self.rollout.inputs()
            with torch.no_grad():
                a_t = ensemble_act(self.teachers, x, deterministic=True)
                greedy = self.student.act(x, deterministic=True)[0]
            label, logp_t = teacher_targets(self.teachers, x, a_t, TEMPERATURE)
            agree += int((greedy == a_t).sum())
            total += a_t.numel()
            same += int((counts(greedy, k1) == counts(a_t, k1)).all(-1).sum())
            _, _, episodes = self.rollout.step(greedy.numpy())
            finished += [float(c) for c in episodes["completion_rate"]]
            xs.append(x)
            acts.append(label)
            targets.append(logp_t)
        return xs, acts, targets, {"agreement": agree / max(total, 1),
                                   "same_counts": same / (self.cfg.steps * self.cfg.num_envs),
                                   "completion_rate": (float(np.mean(finished))
                                                       if finished else None),
                                   "episodes": len(finished)}

    def learn(self, x: Inputs, acts: torch.Tensor, targets: torch.Tensor) -> float:
        """``updates`` minibatch steps on the buffer; the mean loss."""
        cfg = self.cfg
        n = acts.shape[0]
        bs = min(cfg.batch_size, n)
        self.student.train()
        losses = []
        for _ in range(cfg.updates):
            idx = torch.randint(n, (bs,), generator=self.gen)
            loss = distill_loss(self.student, index_inputs(x, idx), acts[idx], targets[idx])
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.student.parameters(), cfg.max_grad_norm)
            self.opt.step()
            losses.append(float(loss.detach()))
        self.student.eval()
        return float(np.mean(losses))

    def save(self, path: Path, seconds: float) -> None:
        blob = {k: v for k, v in self.blob.items()
                if k not in ("optimizer", "generator", "distill", "integrity")}
        blob["state_dict"] = self.student.state_dict()
        blob["distill"] = json.dumps({
            "config": asdict(self.cfg), "teacher_files": [shown(p) for p in self.teacher_files],
            "student_file": shown(self.student_file), "history": self.history,
            "seconds": round(seconds, 1)})
        save(path, blob)

    def run(self) -> dict[str, Any]:
        """All iterations; writes ``last.pt`` after each and ``history.json`` at the end.

        Each iteration's record: ``samples`` (states in the buffer), ``loss`` (mean KL of
        its minibatches), and, on its new states before training on them, ``agreement``
        (fraction of node actions where the student's greedy action is the teacher's),
        ``same_counts`` (fraction of states where both put the same number of nodes on
        every task: the same schedule up to which node does what) and ``completion_rate``
        of the ``episodes`` that ended (None if none did; with the executed actions)."""
        cfg = self.cfg
        t0 = time.perf_counter()
        bx: list[Inputs] = []
        ba: list[torch.Tensor] = []
        bt: list[torch.Tensor] = []
        bar = tqdm(range(cfg.iterations), desc="distil MARA", unit="iteration",
                   disable=not cfg.progress)
        for it in bar:
            xs, acts, targets, rec = self.collect()
            bx, ba, bt = bx + xs, ba + acts, bt + targets
            while sum(a.shape[0] for a in ba) - ba[0].shape[0] >= cfg.buffer:
                bx, ba, bt = bx[1:], ba[1:], bt[1:]
            loss = self.learn(stack_inputs(bx), torch.cat(ba), torch.cat(bt))
            rec = {"iteration": it, "samples": int(sum(a.shape[0] for a in ba)),
                   "loss": loss, **rec, "seconds": round(time.perf_counter() - t0, 1)}
            self.history.append(rec)
            bar.set_postfix(agree=f"{rec['agreement']:.3f}", same=f"{rec['same_counts']:.3f}",
                            loss=f"{loss:.3f}")
            self.save(self.out / "last.pt", time.perf_counter() - t0)
        seconds = time.perf_counter() - t0
        (self.out / "history.json").write_text(json.dumps(
            {"config": asdict(cfg), "history": self.history, "seconds": round(seconds, 1)},
            indent=1) + "\n")
        return {"iterations": cfg.iterations, "seconds": round(seconds, 1),
                "checkpoint": str(self.out / "last.pt")}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mara-distill``."""
    cfg = parse_config(DistillConfig, argv, prog="mara-distill",
                       description="Distil an ensemble of MARA checkpoints into one MAT "
                                   "(see docs/mara.md).")
    summary = Distiller(cfg).run()
    print(f"distilled {summary['iterations']} iterations in {summary['seconds']:.0f} s -> "
          f"{summary['checkpoint']}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
