"""How attention heads split the hidden size, one rule for every entry point: :func:`head_problem`, the
refusal of ``model.n_head`` heads that do not divide ``model.n_embd`` (or, for a family with rotary
positions, that leave an odd head dim), before Hydra (:func:`flopsweep.model_identity.command_line_problem`,
leading with the key the command line set) and in each family's check (:func:`flopsweep.models.gpt2.check`,
:func:`flopsweep.models.llama.check`). Torch-free; imports only :class:`flopsweep.config.ConfigError`.
"""

from __future__ import annotations

from flopsweep.config import ConfigError

HEAD_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""The head counts a ``model.n_head`` fix picks from: the one nearest the given count that the shape takes
(:func:`head_counts`)."""


def head_counts(n_embd: int, *, pairs: bool = False, kv_heads: int = 1) -> list[int]:
    """The counts of :data:`HEAD_COUNTS` that ``n_embd`` channels take: each divides ``n_embd``, leaves an
    even head dim ``n_embd / n_head`` where ``pairs`` (RoPE rotates channel pairs), and is a multiple of
    ``kv_heads`` (GQA: each key/value head serves a whole group). ``[]`` where none does (an odd
    ``n_embd`` with ``pairs``)."""
    return [
        h
        for h in HEAD_COUNTS
        if n_embd % h == 0 and not (pairs and (n_embd // h) % 2) and kv_heads >= 1 and h % kv_heads == 0
    ]


def head_problem(
    n_embd: int, n_head: int, given: str, *, pairs: bool = False, kv_heads: int = 1
) -> ConfigError | None:
    """The refusal of ``n_head`` heads that do not divide the hidden size ``n_embd``, or (``pairs``: Llama's
    RoPE rotates channel pairs) that leave an odd head dim, else None (also for a size below 1, which
    :func:`flopsweep.config.require_positive` refuses).

    It leads with ``given`` (``model.n_head`` or ``model.n_embd``: the key the user set) and its fix
    changes that key, one ``key=value`` that the family accepts typed back: for ``model.n_head`` the count
    of :func:`head_counts` nearest ``n_head`` (``kv_heads``: the family's ``n_kv_head``, which the count
    must stay a multiple of); for ``model.n_embd``, or where no count fits, the largest multiple of
    ``2 n_head`` up to ``n_embd`` (an even head dim, taken by every family)."""
    if n_head < 1 or n_embd < 1:
        return None
    divides = n_embd % n_head == 0
    if divides and not (pairs and (n_embd // n_head) % 2):
        return None
    odd = f"gives an odd head dim n_embd/n_head={n_embd // n_head}"  # divides: an odd head dim under RoPE
    fits = head_counts(n_embd, pairs=pairs, kv_heads=kv_heads)
    if given == "model.n_head" and fits:
        near = min(fits, key=lambda h: (abs(h - n_head), h))
        wanted = "leave an even head dim" if divides else "divide n_embd"
        return ConfigError(
            "model.n_head",
            n_head,
            f"{odd} (model.n_embd={n_embd}){PAIRS}"
            if divides
            else f"does not divide model.n_embd={n_embd}{EACH}",
            f"choose heads that {wanted}, e.g. model.n_head={near}",
        )
    step = 2 * n_head
    size = max(step, n_embd - n_embd % step)
    return ConfigError(
        "model.n_embd",
        n_embd,
        f"{odd} (model.n_head={n_head}){PAIRS}"
        if divides
        else f"is not divisible by model.n_head={n_head}{EACH}",
        f"choose a multiple of {'2 n_head' if divides else 'n_head'}, e.g. model.n_embd={size}",
    )


EACH = " (each head takes n_embd / n_head channels)"
"""Why heads must divide the hidden size, said after the refusal of either key."""

PAIRS = ", and RoPE rotates pairs of channels"
"""Why a family with rotary positions (``pairs``) needs an even head dim."""
