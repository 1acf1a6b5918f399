#!/usr/bin/env bash
# `tribunal demo --job FILE` on the short MLP, GPT and CNN jobs: a referee, an honest and a cheating
# provider and a client over loopback WebSockets; the cheater corrupts a random node at a random step
# and must lose at exactly that step and node.   Usage: demo_jobs.sh TRIBUNAL SOURCE_DIR
set -euo pipefail
tribunal=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for job in short_mlp short_gpt short_cnn; do
  for seed in 1 2; do
    out=$("$tribunal" demo --job "$src/scenarios/jobs/$job.toml" --seed "$seed" --out "$work/$job-$seed" --json 2>/dev/null)
    verdict=$(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); i = r["injected"]; v = r["verdict"]
print("caught" if r.get("caught") else "NOT CAUGHT", i["step"], i["node"], i["op"], v and v["reason"])' "$out")
    echo "$job seed $seed: $verdict"
    case $verdict in caught*) ;; *) exit 1 ;; esac
  done
done
