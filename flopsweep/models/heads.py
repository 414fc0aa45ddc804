"""How attention heads split the hidden size, one rule for every entry point: :func:`head_problem`, the
refusal of ``model.n_head`` heads that do not divide ``model.n_embd``, before Hydra
(:func:`flopsweep.model_identity.command_line_problem`, leading with the key the command line set) and
in each family's check (:func:`flopsweep.models.gpt2.check`, :func:`flopsweep.models.llama.check`).
Torch-free; imports only :class:`flopsweep.config.ConfigError`.
"""

from __future__ import annotations

from flopsweep.config import ConfigError

HEAD_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""The head counts a ``model.n_head`` fix picks from: the one nearest the given count that divides
``n_embd`` (1 always does)."""


def head_problem(n_embd: int, n_head: int, given: str) -> ConfigError | None:
    """The refusal of ``n_head`` heads that do not divide the hidden size ``n_embd``, leading with
    ``given`` (``model.n_head`` or ``model.n_embd``: the key the user set), else None (also for a
    size below 1, which :func:`flopsweep.config.require_positive` refuses). Its fix is accepted by
    every family: a head count from :data:`HEAD_COUNTS` that divides ``n_embd``, or the largest
    multiple of ``2 n_head`` up to ``n_embd`` (an even head dim: Llama's RoPE rotates channel pairs)."""
    if n_head < 1 or n_embd < 1 or n_embd % n_head == 0:
        return None
    if given == "model.n_head":
        fits = [h for h in HEAD_COUNTS if n_embd % h == 0]
        near = min(fits, key=lambda h: (abs(h - n_head), h))
        return ConfigError(
            "model.n_head",
            n_head,
            f"does not divide model.n_embd={n_embd} (each head takes n_embd / n_head channels)",
            f"choose heads that divide n_embd, e.g. model.n_head={near}",
        )
    step = 2 * n_head
    size = max(step, n_embd - n_embd % step)
    return ConfigError(
        "model.n_embd",
        n_embd,
        f"is not divisible by model.n_head={n_head} (each head takes n_embd / n_head channels)",
        f"choose a multiple of n_head, e.g. model.n_embd={size}",
    )
