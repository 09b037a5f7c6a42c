#!/bin/sh
# Drives an EXTERNAL study from a shell loop: ask for a trial, evaluate it, tell the result.
# The evaluator here is examples/commands/quadratic.sh; put any program in its place.
#   DHPT_SCHEDULER=HOST:PORT examples/ask-tell.sh [STUDY_FILE]
# `dhpt ask` exits 3 once the study has ended and 4 when no trial is free just now.
set -eu
here=$(dirname "$0")
dhpt=${DHPT:-dhpt}
study_file=${1:-$here/studies/external-ask-tell.yaml}
study=$(sed -n 's/^name: *//p' "$study_file")

"$dhpt" submit "$study_file"
while :; do
  status=0
  line=$("$dhpt" ask "$study") || status=$?
  case $status in
    0) ;;
    3) break ;;
    4) sleep 1; continue ;;
    *) exit "$status" ;;
  esac
  eval "set -- $line"   # "NUMBER --x=... --y=...", a value with spaces quoted
  trial=$1
  shift
  loss=$("$here/commands/quadratic.sh" "$@" | sed -n 's/.*loss=//p' | tail -n 1)
  "$dhpt" tell "$study" "$trial" "loss=$loss"
done
"$dhpt" best "$study"
