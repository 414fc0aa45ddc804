# Source on a GPU machine whose image lacks hydra/deepspeed: installs the wheels in .whl/
# (see benchmarks/README.md) into /tmp/site once (later sources reuse it, so that scripts
# started in parallel, one per GPU, do not race) and sets the environment the runs need.
if [ -d .whl ]; then
  if [ ! -f /tmp/site/.flopsweep-wheels ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || return 1
    touch /tmp/site/.flopsweep-wheels
  fi
  export PYTHONPATH=/tmp/site:$PWD
fi
# DeepSpeed's FusedAdam JIT build cannot parse "9.0a"; Hopper needs "9.0".
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
alias python=python3
