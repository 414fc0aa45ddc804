"""flopsweep: Hydra-driven sweeps of transformer training throughput (FSDP2, DeepSpeed ZeRO)."""

__version__ = "0.1.0"
