"""The names of the ``torch.profiler.record_function`` spans that a training step writes and
:mod:`flopsweep.profile` reads back from the Chrome trace.

Torch-free and importing nothing: the trainers (:mod:`flopsweep.backends`) write the spans and the
profiler finds them by name, so the name lives below both, and the training step does not import
the profiler.
"""

from __future__ import annotations

STEP_ANNOTATION = "flopsweep.step"
"""The span around the whole profiled optimizer step (written by ``profile.profile_step``)."""
OPTIMIZER_ANNOTATION = "flopsweep.optimizer"
"""The span around gradient clipping, the optimizer update and zeroing (the trainers write it;
DeepSpeed: around ``engine.step()``)."""
