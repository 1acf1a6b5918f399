#!/usr/bin/env bash
# The service recipes of deploy/ (docs/running.md, "Run nodes as services"), without a container
# runtime or a running systemd: the systemd units pass `systemd-analyze verify` (skipped when it is not
# installed) and are hardened; deploy/Containerfile is linted (Debian stages, apt-get use, a non-root
# user, an exec-form entry point that the image copies); its entry point's command is run here with the
# built binary: a referee that listens, serves /metrics with the series the Grafana dashboard
# (deploy/grafana/tribunal.json) plots, and exits 0 within 5 s of SIGTERM.
# Usage: deploy.sh PATH/TO/tribunal SOURCE_DIR
set -euo pipefail
bin=$(realpath "$1")
src=$2
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for unit in tribunal-referee tribunal-provider; do
  f="$src/deploy/systemd/$unit.service"
  for want in DynamicUser=yes NoNewPrivileges=yes ProtectSystem=strict "ReadWritePaths=/var/lib/$unit" \
      Restart=on-failure KillSignal=SIGTERM "StateDirectory=$unit"; do
    grep -qx "$want" "$f" || fail "$unit: no $want"
  done
  [ "$(grep -c '^ReadWritePaths=' "$f")" -eq 1 ] || fail "$unit: one writable path only"
  if command -v systemd-analyze >/dev/null; then
    # The units name /usr/bin/tribunal; verify checks that ExecStart's binary exists, so the copy
    # verified names the built one.
    sed "s#/usr/bin/tribunal#$bin#g" "$f" >"$tmp/$unit.service"
    out=$(systemd-analyze verify --man=no "$tmp/$unit.service" 2>&1) || fail "$unit: systemd-analyze verify: $out"
    if echo "$out" | grep -i "$unit" | grep -qiv "No such file\|not found\|Failed to open"; then
      fail "$unit: systemd-analyze verify warns: $out"
    fi
    echo "$unit.service: systemd-analyze verify passed"
  else
    echo "SKIP: systemd-analyze is not installed (Debian's systemd package); $unit.service checked by grep only"
  fi
done

# The Containerfile, linted, and its entry point command (JSON arrays) as the image would run it.
python3 - "$src/deploy/Containerfile" "$src" >"$tmp/cmd" <<'PY'
import json, os, re, sys
path, src = sys.argv[1:]
text = re.sub(r"\\\n", " ", open(path).read())
lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
def fail(what): sys.exit(f"FAIL: Containerfile: {what}")
ins = [(l.split(None, 1)[0].upper(), l.split(None, 1)[1] if " " in l else "") for l in lines]
known = {"FROM", "RUN", "COPY", "WORKDIR", "USER", "VOLUME", "EXPOSE", "STOPSIGNAL", "ENTRYPOINT", "CMD", "ENV", "ARG", "LABEL"}
for k, _ in ins:
    if k not in known: fail(f"unknown instruction {k}")
froms = [a for k, a in ins if k == "FROM"]
if not froms or not all(a.split()[0] == "debian:12" for a in froms): fail(f"every stage FROM debian:12 (got {froms})")
for k, a in ins:
    if k == "RUN" and "apt-get install" in a:
        if "apt-get update" not in a: fail("apt-get install without apt-get update in the same RUN")
        if "--no-install-recommends" not in a or " -y" not in a: fail("apt-get install without -y --no-install-recommends")
        if "rm -rf /var/lib/apt/lists" not in a: fail("apt lists left in the layer")
final = max(i for i, (k, _) in enumerate(ins) if k == "FROM")
users = [a for k, a in ins[final:] if k == "USER"]
if not users or users[-1] in ("root", "0"): fail("the image runs as root")
if ("STOPSIGNAL", "SIGTERM") not in ins[final:]: fail("no STOPSIGNAL SIGTERM")
ep = [a for k, a in ins[final:] if k == "ENTRYPOINT"]
cmd = [a for k, a in ins[final:] if k == "CMD"]
if len(ep) != 1 or len(cmd) != 1: fail("one ENTRYPOINT and one CMD")
try:
    ep, cmd = json.loads(ep[0]), json.loads(cmd[0])
except ValueError:
    fail("ENTRYPOINT and CMD in exec (JSON) form, so SIGTERM reaches the node")
copies = {a.split()[-1]: a.split()[-2] for k, a in ins[final:] if k == "COPY" and not a.startswith("--from")}
if ep[0] not in copies or not os.access(os.path.join(src, copies[ep[0]]), os.X_OK):
    fail(f"the entry point {ep[0]} is not an executable file the image copies")
if cmd[0] not in ("referee", "provider"): fail(f"CMD runs {cmd[0]}, not a node")
print(os.path.join(src, copies[ep[0]]), *cmd)
PY
read -r -a cmd <"$tmp/cmd"
# Run outside a container: its volume is a temporary directory, its port any free one.
for i in "${!cmd[@]}"; do
  cmd[i]=${cmd[i]//\/var\/lib\/tribunal/$tmp/volume}
  cmd[i]=${cmd[i]//0.0.0.0:17100/127.0.0.1:0}
done
mkdir -p "$tmp/volume"
TRIBUNAL=$bin "${cmd[@]}" >"$tmp/out" 2>"$tmp/log" &
pid=$!
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
  [[ "$port" =~ ^[1-9][0-9]*$ ]] && break
  sleep 0.1
done
[[ "$port" =~ ^[1-9][0-9]*$ ]] || fail "the entry point's referee did not start: $(cat "$tmp/log")"
[ -s "$tmp/volume/referee.key" ] || fail "the entry point made no key"
python3 - "$port" "$src/deploy/grafana/tribunal.json" <<'PY' || fail "the dashboard names a series the referee does not export"
import json, re, sys, urllib.request
port, dash = sys.argv[1:]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
names = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
exprs = [t["expr"] for p in json.load(open(dash))["panels"] for t in p["targets"]]
wanted = {n for e in exprs for n in re.findall(r"\b((?:tribunal|process)_[a-z_]+?)(?:_bucket)?\b", e)}
missing = sorted(n for n in wanted if not n.startswith("tribunal_provider_") and n not in names)
if missing: sys.exit(f"not in /metrics: {missing}")
if 'tribunal_build_info{contract="' not in text: sys.exit("no tribunal_build_info")
print(f"/metrics has the {len(wanted)} series the dashboard plots (provider's aside)")
PY
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "the referee still runs 5 s after SIGTERM"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || fail "the referee exited $rc after SIGTERM: $(tail -3 "$tmp/log")"
echo "entry point: ${cmd[*]:1} ran, served /metrics and exited 0 on SIGTERM"
