#!/bin/sh
# The container's entry point (deploy/Containerfile): makes the node's key on first start (keygen never
# replaces one), then runs `tribunal "$@"` as PID 1's child-less replacement (exec), so SIGTERM reaches
# the node. TRIBUNAL (default /usr/bin/tribunal) lets tests/deploy.sh run it outside a container.
set -eu
tribunal=${TRIBUNAL:-/usr/bin/tribunal}
key=
prev=
for arg in "$@"; do
  [ "$prev" = "--key" ] && key=$arg
  prev=$arg
done
if [ -n "$key" ] && [ ! -e "$key" ]; then
  "$tribunal" keygen "$key" >/dev/null
fi
exec "$tribunal" "$@"
