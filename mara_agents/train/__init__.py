"""Training MARA: the rollout shared by every trainer, PPO's pieces, imitation (stage 1),
the PPO trainer (``mara-train``) and distillation (``mara-distill``). Inference
(:mod:`mara_agents.mat`) never imports this package."""
