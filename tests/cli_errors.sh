#!/usr/bin/env bash
# Bad input to `tribunal train` must give exactly one clear error line and exit code 1 (usage: 2),
# never a crash. Usage: cli_errors.sh PATH/TO/tribunal
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=/usr/share/datasets/fashion-mnist
fail=0

job() {  # job FILE [widths] [data dir] [extra line in [train]]
  cat >"$1" <<TOML
[model]
kind = "mlp"
widths = ${2:-[784, 16, 10]}
[data]
dir = "${3:-$data}"
[train]
seed = 1
steps = 3
batch_size = 8
stride = 2
${4:-}
[optimizer]
kind = "sgd"
lr = 0.1
TOML
}

# expect NAME CODE PATTERN -- ARGS...: runs tribunal, checks the exit code, that stderr is one line
# matching PATTERN, and that nothing crashed.
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(grep -c . "$tmp/err")
  if [ "$rc" -ne "$code" ] || ! grep -qE -e "$pattern" "$tmp/err" || { [ "$code" -eq 1 ] && [ "$lines" -ne 1 ]; }; then
    echo "FAIL $name: exit $rc (want $code), stderr:"; sed 's/^/    /' "$tmp/err"; fail=1
  else
    echo "ok   $name: $(head -n1 "$tmp/err")"
  fi
}

mkdir -p "$tmp/empty" "$tmp/corrupt" "$tmp/truncated"
cp "$data"/*.gz "$tmp/corrupt/" && head -c 5000 /dev/urandom >"$tmp/corrupt/train-images-idx3-ubyte.gz"
cp "$data"/*.gz "$tmp/truncated/" && head -c 1000000 "$data/train-images-idx3-ubyte.gz" >"$tmp/truncated/train-images-idx3-ubyte.gz"

job "$tmp/missing.toml" "" "$tmp/empty"
expect "missing data file" 1 "train-images-idx3-ubyte.gz" -- train "$tmp/missing.toml" --out "$tmp/o1"
job "$tmp/corrupt.toml" "" "$tmp/corrupt"
expect "corrupt data file" 1 "train-images-idx3-ubyte.gz" -- train "$tmp/corrupt.toml" --out "$tmp/o2"
job "$tmp/truncated.toml" "" "$tmp/truncated"
expect "truncated gz" 1 "train-images-idx3-ubyte.gz" -- train "$tmp/truncated.toml" --out "$tmp/o3"
printf '[model]\nwidths = [784, 16, 10\n' >"$tmp/bad.toml"
expect "bad TOML" 1 "bad.toml:[0-9]+:[0-9]+" -- train "$tmp/bad.toml"
job "$tmp/unknown.toml" "" "" "learning_rate = 3"
expect "unknown key" 1 "unknown key 'learning_rate'" -- train "$tmp/unknown.toml"
job "$tmp/shape.toml" "[100, 16, 10]"
expect "impossible shape" 1 "widths starts with 100" -- train "$tmp/shape.toml" --out "$tmp/o4"
job "$tmp/zero.toml" "[784, 0, 10]"
expect "zero width" 1 "out of range" -- train "$tmp/zero.toml"
job "$tmp/ok.toml"
touch "$tmp/file"
expect "unwritable output dir" 1 "cannot create output directory" -- train "$tmp/ok.toml" --out "$tmp/file/sub"
expect "missing job file" 1 "nope.toml: cannot open" -- train "$tmp/nope.toml"
expect "bad flag value" 2 "--threads expects an integer" -- train "$tmp/ok.toml" --threads zero
expect "resume without checkpoint" 1 "no checkpoint" -- train "$tmp/ok.toml" --out "$tmp/o5" --resume

# Scenario scripts: a typo names its file and line; a reference to nothing is refused before any run.
scenario() {  # scenario FILE [work table lines] [expect table lines]
  local work=${2:-$'kind = "corrupt_node"\nstep = 1\nnode = 2'} want=${3:-'winner = "alice"'}
  cat >"$1" <<TOML
name = "s"
job = "$tmp/ok.toml"
[[provider]]
name = "alice"
[[provider]]
name = "mallory"
[provider.work]
$work
[expect]
$want
TOML
}
scenario "$tmp/s1.toml" 'kind = "corupt_node"'
expect "scenario: unknown work kind" 1 "s1.toml:[0-9]+:[0-9]+: work.kind 'corupt_node'" -- scenario run "$tmp/s1.toml"
scenario "$tmp/s2.toml" 'kind = "corrupt_node"
step = 3
node = 2'
expect "scenario: step past the job" 1 "s2.toml:[0-9]+:[0-9]+: work.step = 3 is out of range" -- scenario run "$tmp/s2.toml"
scenario "$tmp/s3.toml" "" 'winner = "bob"'
expect "scenario: unknown winner" 1 "s3.toml:[0-9]+:[0-9]+: expect.winner 'bob'" -- scenario run "$tmp/s3.toml"
scenario "$tmp/s4.toml" 'kind = "corrupt_node"
step = 1
node = 99'
expect "scenario: node outside the graph" 1 "s4.toml.*node" -- scenario run "$tmp/s4.toml"
expect "scenario: no files" 2 "give at least one scenario file" -- scenario run
exit $fail
