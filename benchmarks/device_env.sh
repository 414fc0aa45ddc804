# Source from the repository root on a GPU machine whose image lacks hydra/deepspeed:
# installs the wheels in .whl/ (see benchmarks/README.md) into /tmp/site once, under a lock
# (copies of h200.sh started in parallel, one per GPU, wait for the first install), and sets
# the environment the runs need. Run Python as `python3`, the image's interpreter.
if [ -d .whl ]; then
  (
    flock 9 || exit 1
    [ -f /tmp/site/.flopsweep-wheels ] && exit 0
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl && touch /tmp/site/.flopsweep-wheels
  ) 9>/tmp/flopsweep-wheels.lock || return 1
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
# DeepSpeed's FusedAdam JIT build cannot parse "9.0a"; Hopper needs "9.0".
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
