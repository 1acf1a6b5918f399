#!/usr/bin/env bash
# tools/gen_man.py writes tribunal(1) from the binary's --help: every command has its section, every
# TRIBUNAL_* variable an option reads is in ENVIRONMENT, the version line is the binary's, and (when
# groff is installed) the page renders without a warning. Usage: man_page.sh PATH/TO/tribunal SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
python3 "$src/tools/gen_man.py" "$bin" -o "$tmp/tribunal.1" || fail "gen_man.py exited $?"
page=$tmp/tribunal.1
grep -qx ".TH TRIBUNAL 1 \"[0-9-]*\" \"$("$bin" --version | head -n1)\" \"User Commands\"" "$page" || fail "no .TH line: $(head -n1 "$page")"
for c in demo train referee provider delegate campaign keygen verify audit report export "scenario run" "scenario graph"; do
  grep -qx ".SS \"tribunal $c\"" "$page" || fail "no section for tribunal $c"
done
grep -q '^\\fB\\-\\-steps N\\fR$' "$page" || fail "train's --steps is missing"
envs=$(for c in referee provider delegate; do "$bin" "$c" --help; done | grep -o 'Env:TRIBUNAL_[A-Z_]*' | sort -u | cut -d: -f2)
[ "$(echo "$envs" | wc -l)" -ge 10 ] || fail "only $(echo "$envs" | wc -l) environment variables in --help"
for e in $envs; do
  sed -n '/^\.SH ENVIRONMENT/,/^\.SH VERSION/p' "$page" | grep -qx "\\\\fB$e\\\\fR" || fail "$e is not in ENVIRONMENT"
done
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  [ -z "$warnings" ] || fail "groff warns: $warnings"
fi
echo "ok   tribunal.1: $(grep -c '^\.SS' "$page") command sections, $(echo "$envs" | wc -l) environment variables"
