#!/bin/sh
# A COMMAND trial in plain POSIX shell. DHPT (or `examples/ask-tell.sh`) runs it with the
# trial's parameters as arguments, here --x=VALUE --y=VALUE; it prints its objective as
# `name=value` lines (Katib's format), one per step, so early stopping can judge it as it runs.
# The last `loss=` line is the trial's result. Any other output is just log.
set -eu
x=0
y=0
for arg in "$@"; do
  case "$arg" in
    --x=*) x=${arg#--x=} ;;
    --y=*) y=${arg#--y=} ;;
    *) echo "ignoring $arg" >&2 ;;
  esac
done
echo "evaluating at x: $x, y: $y"
for step in 1 2 3; do
  # A noisy start that settles: (x - 1)^2 + (y + 2)^2 plus 1/step.
  awk -v x="$x" -v y="$y" -v s="$step" \
    'BEGIN { printf "step=%d loss=%.9f\n", s, (x - 1) ^ 2 + (y + 2) ^ 2 + 1 / s }'
done
