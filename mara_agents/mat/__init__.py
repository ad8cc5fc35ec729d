"""MARA's Multi-Agent Transformer: the model, its inputs, ensembles, the numpy greedy path
and the inference policy (:mod:`mara_agents.mat.mara_policy`). Nothing here imports training
code."""

from mara_agents.mat.model import MAT, Inputs, MATConfig

__all__ = ["Inputs", "MAT", "MATConfig"]
