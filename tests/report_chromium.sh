#!/usr/bin/env bash
# `tribunal report` rendered in a real browser: for the demo's MLP, GPT and CNN disputes, the report
# (rounds from the referee's store, both claims' losses from the providers' checkpoints) must be
# self-contained (no URL to fetch), and headless Chromium (Debian's `chromium`) must render it: its DOM
# names the verdict's reason, step and node, and its screenshot is a real picture. The screenshots are
# kept in SHOTS_DIR (default ./report-screenshots, printed).   Usage: report_chromium.sh TRIBUNAL SOURCE_DIR
set -euo pipefail
tribunal=$1
src=$2
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "SKIP: chromium is not installed (scripts/bootstrap.sh installs Debian's chromium)"
  exit 0
fi
shots=${SHOTS_DIR:-$PWD/report-screenshots}
mkdir -p "$shots"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# No network for the browser: every name resolves nowhere, so a report that fetched anything would show it.
chrome=(timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
        --user-data-dir="$work/profile" --host-resolver-rules="MAP * ~NOTFOUND")
for job in short_mlp short_gpt short_cnn; do
  out=$("$tribunal" demo --job "$src/scenarios/jobs/$job.toml" --seed 1 --out "$work/$job" --json 2>/dev/null)
  read -r verdict key honest cheater step node reason < <(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); v = r["verdict"]
print(v["file"], r["referee_key"], r["stores"][0], r["stores"][1], v["step"], v["node"], v["reason"])' "$out")
  html="$work/$job.html"
  "$tribunal" report "$verdict" --referee-key "$key" --store "$work/$job/referee" --checkpoints "$honest" \
    --checkpoints "$cheater" --out "$html" >/dev/null
  if grep -Eq 'https?://|src=|url\(' "$html"; then echo "$job: the report names an external resource"; exit 1; fi
  "${chrome[@]}" --dump-dom "file://$html" >"$work/$job.dom" 2>/dev/null
  "${chrome[@]}" --window-size=1100,2400 --screenshot="$shots/$job.png" "file://$html" >/dev/null 2>&1
  python3 - "$work/$job.dom" "$shots/$job.png" "$reason" "$step" "$node" "$job" <<'PY'
import re, struct, sys
dom, png, reason, step, node, job = sys.argv[1:]
d = open(dom, encoding="utf-8").read()
def check(what, ok):
    if not ok:
        sys.exit(f"{job}: {what}")
check("the DOM names the verdict's reason", f'id="reason">{reason}<' in d)
check("the DOM names the located step", f'id="located-step">{step}<' in d)
check("the DOM names the located node", f'id="located-node">{node}<' in d)
check("the signature is checked valid", '<span class="ok">valid</span>' in d)
check("the graph highlights the located node", 'id="located-box"' in d)
check("the narrowing, graph and loss pictures are there", all(f'class="{c}"' in d for c in ("narrowing", "graph", "losses")))
check("the rounds are listed", len(re.findall(r"<li", d)) >= 8)
check("the parties' committed hashes differ at the located node's output", 'id="hashes"' in d and 'class="mono bad"' in d)
# Issue 34, item 5: the report explains itself.
summary = re.search(r'<p id="summary"[^>]*>(.*?)</p>', d, re.S)
check("a summary sentence on top", summary is not None and d.index('id="summary"') < d.index("<h2>"))
text = re.sub(r"<[^>]+>", "", summary.group(1)) if summary else ""
check(f"the summary names the convicted provider's key and address: {text!r}",
      re.search(r"provider [0-9a-f]{16}… at ws://127\.0\.0\.1:\d+/ committed a wrong ", text) is not None)
check(f"the summary names the step and says the referee recomputed it: {text!r}",
      f"at step {step} (node {node})" in text and "the referee re-executed" in text and "recomputed it" in text)
ref = re.search(r'id="referee-hash">([0-9a-f]{32})<', d)
check("the referee's recomputed output hash is shown", ref is not None)
row = re.search(r"<tr><td>output 0</td>(.*?)</tr>", d, re.S).group(1)
cells = re.findall(r'<td class="mono( ok| bad)?"[^>]*>([^<]*)<', row)
check(f"the recomputed hash equals the honest claim's and not the cheater's: {cells}",
      len(cells) == 3 and {cells[0][0], cells[1][0]} == {" ok", " bad"} and
      [c[1] for c in cells[:2] if c[0] == " ok"] == [cells[2][1]])
check("the timeline gives the duration and each level's time",
      'id="duration"' in d and all(f'id="level-{k}-time"' in d for k in (1, 2, 3)) and 'id="decided-at"' in d)
check("the job's hyperparameters are shown", re.search(r'id="job-toml"[^>]*>[^<]*lr = ', d) is not None)
stats = re.search(r'id="opened-stats">(.*?)</table>', d, re.S)
check("the opened inputs are summarised whole (elements, min, max, mean)",
      stats is not None and len(re.findall(r"<tr><td class=\"mono\">", stats.group(1))) >= 1)
check("opened tensors are named, not numbered", 'id="opened"' in d and not re.search(r"<td>#\d+</td>", d))
check("the rounds agree with the verdict's count", re.search(r'<span id="rounds">\d+</span> questions asked', d) is not None)
diff = re.search(r'id="state-diff">(.*?)</table>', d, re.S)
check("the first differing checkpoint is compared element by element",
      diff is not None and re.search(r"<td>[1-9]\d* of \d+</td>", diff.group(1)) is not None)
losses = re.search(r'<svg class="losses"(.*?)</svg>', d, re.S).group(0)
check("the loss chart has axis titles", ">step</text>" in losses and "training loss" in losses)
check("the loss chart names the providers, not claims", "claim 0" not in losses and losses.count("— provider ") == 2)
b = open(png, "rb").read()
check("the screenshot is a PNG", b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR")
w, h = struct.unpack(">II", b[16:24])
check(f"the screenshot is 1100 × 2400 (got {w} × {h})", (w, h) == (1100, 2400))
check(f"the screenshot shows something ({len(b)} bytes)", len(b) > 40000)
print(f"{job}: {reason} at step {step}, node {node}; DOM checked; screenshot {png} ({w}×{h}, {len(b)} bytes)")
PY
done
