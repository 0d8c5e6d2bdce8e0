#!/usr/bin/env bash
# bounds.sh: launch bounds of grove_control_rollout per env, this checkout's (64, 1) against
# (64, 6) and (64, 8), on a GPU machine. Stage with tools/control/stage.sh, then write the two
# variants: { echo "#define GROVE_CTRL_BOUNDS __launch_bounds__(64, 6)"; cat kernels/sim.cu; }
# > .device/kv/lb6/sim.cu (and lb8 with 8), and run tools/control/bounds.sh with .device carried.
b=$PWD/.device; export GROVE_CACHE_DIR=/tmp/grove-cache GROVE_BENCH_POP=5000,20000 GROVE_BENCH_EPISODES=4 GROVE_BENCH_MODES=falls,full
for env in hopper walker2d half_cheetah swimmer; do
  for v in new lb6 lb8; do
    if [ $v = new ]; then timeout 200 $b/bench_control_gpu $env; else GROVE_KERNEL_DIR=$b/kv/$v timeout 200 $b/bench_control_gpu $env; fi 2>&1 | grep "| $env" | sed "s/^/$v /"
  done
done
