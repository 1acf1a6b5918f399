#!/usr/bin/env bash
# Bad input to `tribunal` must give exactly one clear error line and exit code 1 (usage: 2), never a
# crash; `tribunal COMMAND --help` lists each command's options. Usage: cli_errors.sh PATH/TO/tribunal
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=/usr/share/datasets/fashion-mnist
fail=0

job() {  # job FILE [widths] [registered data set name] [extra line in [train]]
  cat >"$1" <<TOML
[model]
kind = "mlp"
widths = ${2:-[784, 16, 10]}
[data]
name = "${3:-fashion-mnist}"
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
# matching PATTERN (usage errors too: no usage text after it), and that nothing crashed.
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(grep -c . "$tmp/err")
  if [ "$rc" -ne "$code" ] || ! grep -qE -e "$pattern" "$tmp/err" || [ "$lines" -ne 1 ]; then
    echo "FAIL $name: exit $rc (want $code), stderr (want it to match '$pattern'):"
    sed 's/^/    /' "$tmp/err"; fail=1
  else
    echo "ok   $name: $(head -n1 "$tmp/err")"
  fi
}

# The data set copies: every file whole but train-images, which is not gzip at all (corrupt) or its
# first 1,000,000 bytes (truncated). A setup that did not happen would test "cannot open" instead.
setup_fail() { echo "FAIL setup: $*"; exit 1; }
images=train-images-idx3-ubyte.gz
mkdir -p "$tmp/empty" "$tmp/corrupt" "$tmp/truncated" || setup_fail "mkdir"
cp "$data"/*.gz "$tmp/corrupt/" || setup_fail "cannot copy $data/*.gz"
cp "$data"/*.gz "$tmp/truncated/" || setup_fail "cannot copy $data/*.gz"
{ printf 'corrupt!'; head -c 5000 /dev/urandom; } >"$tmp/corrupt/$images" || setup_fail "cannot write $tmp/corrupt/$images"
head -c 1000000 "$data/$images" >"$tmp/truncated/$images" || setup_fail "cannot write $tmp/truncated/$images"
[ "$(stat -c %s "$tmp/corrupt/$images")" -eq 5008 ] || setup_fail "$tmp/corrupt/$images is not 5008 bytes"
[ "$(stat -c %s "$tmp/truncated/$images")" -eq 1000000 ] && [ "$(stat -c %s "$data/$images")" -gt 1000000 ] ||
  setup_fail "$tmp/truncated/$images is not a strict prefix of 1000000 bytes"

job "$tmp/local.toml" "" "fm-local"
# Each data error names the file and says what is wrong with it (the file name alone would also
# match another error, e.g. "cannot open" when a setup step did not happen).
expect "missing data file" 1 "/empty/$images: cannot open" -- train "$tmp/local.toml" --out "$tmp/o1" --dataset "fm-local=$tmp/empty"
expect "corrupt data file" 1 "/corrupt/$images: not a gzip file$" -- train "$tmp/local.toml" --out "$tmp/o2" --dataset "fm-local=$tmp/corrupt"
expect "truncated gz" 1 "/truncated/$images: truncated gzip stream" -- train "$tmp/local.toml" --out "$tmp/o3" --dataset "fm-local=$tmp/truncated"
expect "unregistered data set" 1 "data set 'fm-local' is not registered at this node" -- train "$tmp/local.toml" --out "$tmp/o6"
expect "bad --dataset" 2 "--dataset expects NAME=PATH" -- train "$tmp/local.toml" --dataset "fm-local"
job "$tmp/plain.toml"
# A job starting from pretrained weights (model.init): unregistered, a malformed option, a file that
# does not fit the model (an empty safetensors file: no tensors).
sed 's/^kind = "mlp"$/kind = "mlp"\ninit = "pre"/' "$tmp/plain.toml" >"$tmp/init.toml" || setup_fail "sed"
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' >"$tmp/empty.safetensors" || setup_fail "printf"
expect "unregistered weights" 1 "weights 'pre' \(model.init\) are not registered at this node" -- train "$tmp/init.toml" --out "$tmp/o7"
expect "bad --weights" 2 "--weights expects NAME=PATH" -- train "$tmp/init.toml" --weights "pre"
expect "weights of another model" 1 "empty.safetensors: weights 'pre' \(model.init\): neither \"l0.weight\" .* nor \"0.weight\"" -- train "$tmp/init.toml" --out "$tmp/o8" --weights "pre=$tmp/empty.safetensors"
expect "replaying a RepOps job" 2 "--replay-logs replays a rounding-log job's logs, but .*plain.toml is a RepOps job" -- train "$tmp/plain.toml" --replay-logs "$tmp"
expect "an unknown float64 GEMM" 2 "--float64-gemm: mkl not in [{]openblas,naive[}]" -- train "$tmp/plain.toml" --float64-gemm mkl
printf '[model]\nwidths = [784, 16, 10]\n[data]\npath = "provider.key"\n[train]\nsteps = 1\nbatch_size = 1\nstride = 1\n[optimizer]\n' >"$tmp/path.toml"
expect "a path in a job" 1 "path.toml:4:8: data.path: a job names its data set" -- train "$tmp/path.toml"
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

# A SIMD path forced with TRIBUNAL_SIMD (read by the ops library) that does not exist, or that this
# build or CPU lacks, fails before the run loads its data, naming the paths there are.
export TRIBUNAL_SIMD=sse
expect "TRIBUNAL_SIMD: unknown path" 1 "TRIBUNAL_SIMD=sse: unknown SIMD path 'sse' \(expected scalar, avx2, avx512 or neon\)" -- \
  train "$tmp/ok.toml" --out "$tmp/o7"
lacking=neon
[ "$(uname -m)" = aarch64 ] && lacking=avx2
export TRIBUNAL_SIMD=$lacking
expect "TRIBUNAL_SIMD: a path this build lacks" 1 "TRIBUNAL_SIMD=$lacking: this [a-z0-9-]+ build has no SIMD path '$lacking' \(available here: scalar" -- \
  train "$tmp/ok.toml" --out "$tmp/o8"
unset TRIBUNAL_SIMD
# The same through --simd: a usage error (exit 2), one line.
expect "--simd: unknown path" 2 "^tribunal: train: --simd: unknown SIMD path 'sse' \(expected scalar, avx2, avx512 or neon\)$" -- \
  train "$tmp/ok.toml" --simd sse --out "$tmp/o9"
expect "--simd: a path this build lacks" 2 "^tribunal: train: --simd: this [a-z0-9-]+ build has no SIMD path '$lacking'" -- \
  train "$tmp/ok.toml" --simd "$lacking" --out "$tmp/o10"
# --device: an unknown name, and cuda in a build without the CUDA backend (CI builds the emulation only).
expect "--device: unknown device" 2 "^tribunal: train: --device: unknown device 'gpu' \(cpu, cuda or cuda-emulated\)$" -- \
  train "$tmp/ok.toml" --device gpu --out "$tmp/o11"
expect "--device cuda without a GPU or backend" 2 "^tribunal: train: --device cuda: (this build has no CUDA backend|no CUDA device)" -- \
  train "$tmp/ok.toml" --device cuda --out "$tmp/o12"

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
expect "scenario: did you mean a work kind" 1 "work.kind 'corupt_node' is not one of .* \(did you mean 'corrupt_node'\?\)$" -- \
  scenario run "$tmp/s1.toml"
scenario "$tmp/s2.toml" 'kind = "corrupt_node"
step = 3
node = 2'
expect "scenario: step past the job" 1 "s2.toml:[0-9]+:[0-9]+: work.step = 3 is out of range" -- scenario run "$tmp/s2.toml"
scenario "$tmp/s3.toml" "" 'winner = "bob"'
expect "scenario: unknown winner" 1 "s3.toml:[0-9]+:[0-9]+: expect.winner 'bob'" -- scenario run "$tmp/s3.toml"
scenario "$tmp/s5.toml" "" 'winner = "alise"'
expect "scenario: did you mean a winner" 1 "expect.winner 'alise' is not a provider name or 'none' \(did you mean 'alice'\?\)$" -- \
  scenario run "$tmp/s5.toml"
scenario "$tmp/s4.toml" 'kind = "corrupt_node"
step = 1
node = 99'
expect "scenario: node outside the graph" 1 "s4.toml.*node" -- scenario run "$tmp/s4.toml"
expect "scenario: no files" 2 "give at least one scenario file" -- scenario run

# The network roles refuse to run without the keys they must trust.
"$bin" keygen "$tmp/node.key" >/dev/null
expect "provider without a referee key" 2 "give at least one --referee-key" -- \
  provider --listen 127.0.0.1:0 --key "$tmp/node.key" --store "$tmp/store"
expect "provider: bad referee key" 2 "--referee-key expects a public key as 64 hex digits" -- \
  provider --listen 127.0.0.1:0 --key "$tmp/node.key" --store "$tmp/store" --referee-key 1234
expect "delegate without the referee's key" 2 "--referee-key HEX is required" -- \
  delegate "$tmp/ok.toml" --provider ws://127.0.0.1:1/ --provider ws://127.0.0.1:2/ --referee ws://127.0.0.1:3/
# The delegate checks the referee before any provider is given the job: nothing listens at the
# referee's URL, so it exits 5 naming the referee (its log lines may come before the error line).
"$bin" delegate "$tmp/ok.toml" --provider ws://127.0.0.1:1/ --provider ws://127.0.0.1:2/ --referee ws://127.0.0.1:3/ \
  --referee-key "$(printf 'ab%.0s' {1..32})" --out "$tmp/verdicts" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 5 ] || ! tail -n1 "$tmp/err" | grep -qE "^tribunal: error: referee ws://127.0.0.1:3/ failed its check, so no provider was given the job: cannot connect"; then
  echo "FAIL delegate with an unreachable referee: exit $rc (want 5), stderr:"; sed 's/^/    /' "$tmp/err"; fail=1
else
  echo "ok   delegate with an unreachable referee: $(tail -n1 "$tmp/err")"
fi
expect "referee: bad network" 2 "--allow-network: network \"10.0.0.0/33\"" -- \
  referee --listen 127.0.0.1:0 --key "$tmp/node.key" --allow-network 10.0.0.0/33

# keygen keeps an existing key file (every copy of its public key handed out would stop matching);
# --force replaces it.
first_key=$("$bin" keygen "$tmp/kept.key")
expect "keygen over an existing key" 1 "^tribunal: error: key file $tmp/kept.key: exists: replacing a key invalidates every copy of its public key handed out .*keygen --force replaces it$" -- \
  keygen "$tmp/kept.key"
if [ "$(head -n1 "$tmp/kept.key")" != tribunal-ed25519-secret-key-1 ] ||
  [ "$(tail -c 65 "$tmp/kept.key" | head -c 64)" != "$first_key" ]; then
  echo "FAIL keygen over an existing key: the file changed"; fail=1
else
  echo "ok   keygen over an existing key: the file still holds $first_key"
fi
forced_key=$("$bin" keygen --force "$tmp/kept.key")
if [ $? -ne 0 ] || [ "$forced_key" = "$first_key" ] || [ "$(tail -c 65 "$tmp/kept.key" | head -c 64)" != "$forced_key" ]; then
  echo "FAIL keygen --force: exit or key not replaced ($first_key → $forced_key)"; fail=1
else
  echo "ok   keygen --force: replaced by $forced_key"
fi

# train --out into the folder of another job's run: refused before a step, naming both job ids.
job "$tmp/job_a.toml" "[784, 16, 10]"
job "$tmp/job_b.toml" "[784, 8, 10]"
id_a=$("$bin" train "$tmp/job_a.toml" --out "$tmp/run_a" --no-eval --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["job_id"])')
id_b=$("$bin" train "$tmp/job_b.toml" --out "$tmp/run_b" --no-eval --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["job_id"])')
[ ${#id_a} -eq 64 ] && [ ${#id_b} -eq 64 ] && [ "$id_a" != "$id_b" ] || setup_fail "job ids '$id_a' '$id_b'"
cp "$tmp/run_a/losses.csv" "$tmp/losses_a.csv"
expect "train --out another job's run" 1 "^tribunal: error: train --out: $tmp/run_a holds checkpoints of job $id_a \(step_000000000.safetensors\), not of job $id_b$" -- \
  train "$tmp/job_b.toml" --out "$tmp/run_a" --no-eval
cmp -s "$tmp/run_a/losses.csv" "$tmp/losses_a.csv" || { echo "FAIL train --out another job's run: its loss log was changed"; fail=1; }

# Usage errors the parser finds name the flag or argument.
expect "unknown option" 2 "^tribunal: demo: unknown option '--nope'$" -- demo --nope
expect "second job file" 2 "unexpected argument '$tmp/ok.toml'" -- train "$tmp/ok.toml" "$tmp/ok.toml"
expect "missing --listen" 2 "^tribunal: referee: --listen is required" -- referee --key "$tmp/node.key"
expect "flag without its value" 2 "^tribunal: train: --threads" -- train "$tmp/ok.toml" --threads
expect "integer out of range" 2 "--retention-days expects an integer in \[0, 36500\], got '-1'" -- \
  referee --listen 127.0.0.1:0 --key "$tmp/node.key" --retention-days -1
expect "bad --corrupt" 2 "--corrupt expects STEP:NODE, got '3'" -- \
  provider --listen 127.0.0.1:0 --key "$tmp/node.key" --store "$tmp/store" --referee-key "$(printf 'ab%.0s' {1..32})" --corrupt 3

# Did you mean: a typo of a command, an option (also one hidden behind a missing required option, and
# in `help`) and a job's TOML key or table names the one meant (engine/suggest.h).
expect "unknown command" 2 "^tribunal: unknown command 'trian' \(did you mean 'train'\?\)$" -- trian "$tmp/ok.toml"
expect "typo of an option" 2 "^tribunal: train: unknown option '--stpes' \(did you mean '--steps'\?\)$" -- \
  train "$tmp/ok.toml" --stpes 3
expect "typo of an option with =" 2 "^tribunal: train: unknown option '--thread=2' \(did you mean '--threads'\?\)$" -- \
  train "$tmp/ok.toml" --thread=2
expect "typo of a required option" 2 "^tribunal: referee: unknown option '--lsten' \(did you mean '--listen'\?\)$" -- \
  referee --lsten 127.0.0.1:0 --key "$tmp/node.key"
expect "help of a typo" 2 "^tribunal: help: unknown command 'delgate' \(did you mean 'delegate'\?\)$" -- help delgate
expect "nothing close" 2 "^tribunal: unknown command 'frobnicate'$" -- frobnicate
job "$tmp/sise.toml" "" "" "batch_sise = 8"
expect "typo of a TOML key" 1 "^tribunal: error: $tmp/sise.toml:11:14: unknown key 'batch_sise' in \[train\] \(did you mean 'batch_size'\?\)$" -- \
  train "$tmp/sise.toml"
sed 's/^\[optimizer\]/[optimiser]/' "$tmp/ok.toml" >"$tmp/optimiser.toml"
expect "typo of a TOML table" 1 "unknown table or key 'optimiser' \(did you mean \[optimizer\]\? expected" -- train "$tmp/optimiser.toml"

# Errors name the user's file, in the user's terms (no function names): a missing or malformed key
# file, a file that is not a verdict.
ref_key=$(printf 'ab%.0s' {1..32})
expect "missing key file" 1 "^tribunal: error: key file $tmp/nokey.key: cannot open: No such file or directory$" -- \
  referee --listen 127.0.0.1:0 --key "$tmp/nokey.key" --data "$tmp/rd"
expect "a job file as a key" 1 "^tribunal: error: key file $tmp/ok.toml: first line is not \"tribunal-ed25519-secret-key-1\"$" -- \
  delegate "$tmp/ok.toml" --provider ws://127.0.0.1:1/ --provider ws://127.0.0.1:2/ --referee ws://127.0.0.1:3/ \
  --referee-key "$ref_key" --key "$tmp/ok.toml"
printf 'g\x00\x01corrupt' >"$tmp/corrupt.bin"
expect "verify a corrupt verdict" 1 "^tribunal: error: $tmp/corrupt.bin: not a valid signed verdict \(Envelope.version: version 103 is not 5 at offset 0\)$" -- \
  verify "$tmp/corrupt.bin" --referee-key "$ref_key"
expect "report of a corrupt verdict" 1 "^tribunal: error: $tmp/corrupt.bin: not a valid signed verdict \(" -- \
  report "$tmp/corrupt.bin" --out "$tmp/r.html"
expect "verify of a job file" 1 "^tribunal: error: $tmp/ok.toml: not a valid signed verdict" -- verify "$tmp/ok.toml" --referee-key "$ref_key"
# The node options from the environment (TRIBUNAL_…, docs/running.md): the same checks as the flags.
TRIBUNAL_LISTEN=nowhere expect "TRIBUNAL_LISTEN" 2 "^tribunal: referee: --listen expects HOST:PORT, got 'nowhere'$" -- \
  referee --key "$tmp/node.key" --data "$tmp/rd"
TRIBUNAL_KEY="$tmp/nokey.key" expect "TRIBUNAL_KEY" 1 "^tribunal: error: key file $tmp/nokey.key: cannot open" -- \
  referee --listen 127.0.0.1:0 --data "$tmp/rd"

# --version: the release, the build, the numerics contract and wire protocol versions.
"$bin" --version >"$tmp/out" 2>"$tmp/err"
rc=$?
contract=$(sed -n 's/^inline constexpr uint32_t kRepOpsContractVersion = \([0-9]*\);.*/\1/p' "$(dirname "$0")/../engine/job.h")
wire=$(sed -n 's/^inline constexpr uint8_t kWireVersion = \([0-9]*\);.*/\1/p' "$(dirname "$0")/../protocol/messages.h")
if [ "$rc" -ne 0 ] || [ -s "$tmp/err" ] || [ -z "$contract" ] || [ -z "$wire" ] || ! grep -qE "^tribunal [0-9]+\.[0-9]+\.[0-9]+ \(.+\)$" "$tmp/out" ||
  ! grep -qx "numerics contract $contract (RepOps; part of every job id)" "$tmp/out" || ! grep -qx "wire protocol $wire" "$tmp/out" ||
  ! grep -qE "^built with [A-Za-z]+ [0-9.]+" "$tmp/out"; then
  echo "FAIL --version: exit $rc, contract '$contract', wire '$wire', stdout:"; sed 's/^/    /' "$tmp/out"; fail=1
else
  echo "ok   --version: $(head -n1 "$tmp/out"), contract $contract"
fi

# TLS and reports (docs/running.md "TLS", "Dispute reports").
expect "--tls-cert without --tls-key" 2 "^tribunal: referee: --tls-cert and --tls-key go together$" -- \
  referee --listen 127.0.0.1:0 --key "$tmp/node.key" --data "$tmp/rd" --tls-cert "$tmp/none.pem"
expect "missing TLS certificate" 1 "^tribunal: error: TLS: certificate $tmp/none.pem: no such file$" -- \
  provider --listen 127.0.0.1:0 --key "$tmp/node.key" --store "$tmp/store" --referee-key "$(printf 'ab%.0s' {1..32})" \
  --tls-cert "$tmp/none.pem" --tls-key "$tmp/none.key"
expect "bad --metrics" 2 "^tribunal: referee: --metrics expects HOST:PORT, got 'nowhere'$" -- \
  referee --listen 127.0.0.1:0 --key "$tmp/node.key" --data "$tmp/rd" --metrics nowhere
expect "report without a verdict" 2 "^tribunal: report: give a verdict file$" -- report
expect "report of a missing file" 1 "^tribunal: error: $tmp/none.bin: cannot open$" -- report "$tmp/none.bin"
expect "report of a job file" 1 "^tribunal: error: " -- report "$tmp/ok.toml" --out "$tmp/r.html"
expect "export without a checkpoint" 2 "^tribunal: export: give a checkpoint \\(a run's step_\\*.safetensors\\)$" -- export
expect "export without --job" 2 "^tribunal: export: give the checkpoint's job with --job JOB.toml$" -- \
  export "$tmp/none.safetensors" --out "$tmp/x"
expect "export of a missing file" 1 "^tribunal: error: $tmp/none.safetensors: cannot open" -- \
  export "$tmp/none.safetensors" --job "$tmp/ok.toml" --out "$tmp/x"
expect "export of a job file" 1 "^tribunal: error: $tmp/ok.toml: " -- export "$tmp/ok.toml" --job "$tmp/ok.toml" --out "$tmp/x"

# --help: exit 0, the text on stdout (nothing on stderr), and it lists the command's options with
# their defaults. help NAME PATTERN... -- ARGS...: every PATTERN must be in `tribunal ARGS`'s stdout.
help() {
  local name=$1 patterns=()
  shift
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? missing=""
  for p in "${patterns[@]}"; do grep -qF -e "$p" "$tmp/out" || missing="$missing '$p'"; done
  if [ "$rc" -ne 0 ] || [ -s "$tmp/err" ] || [ -n "$missing" ]; then
    echo "FAIL help $name: exit $rc (want 0), missing:$missing; stderr:"; sed 's/^/    /' "$tmp/err"; fail=1
  else
    echo "ok   help $name"
  fi
}
help "tribunal" "Usage: tribunal" demo train referee provider delegate campaign scenario keygen verify -- --help
help "train" "Usage: tribunal train" "--steps N" "--threads K=1" "--out DIR" "--resume" "--json" "--no-eval" "--simd PATH" "--device DEVICE=cpu" "--dataset NAME=PATH" -- train --help
help "demo" "--job JOB.toml=scenarios/jobs/fashion_mlp.toml" "--seed S=random" "--threads K=1" "--out DIR" -- demo --help
help "referee" "--listen HOST:PORT REQUIRED" "--key KEYFILE REQUIRED" "--data DIR=referee-data" "--allow-network CIDR" \
  "--client-key HEX" "--reserved-disputes N=1024" "--max-live-disputes N=4096" "--retention-days DAYS=30" \
  "--max-opened-bytes BYTES=1073741824" "--workers" -- referee --help
help "provider" "--store DIR REQUIRED" "--referee-key HEX" "--advertise URL" "--max-steps N=1048576" "--corrupt STEP:NODE" \
  -- provider --help
help "delegate" "--provider URL" "--referee URL" "--referee-key HEX" "--out DIR=verdicts" "--key KEYFILE" -- delegate --help
help "keygen" "Usage: tribunal keygen" "KEYFILE" "--force" -- keygen --help
help "verify" "VERDICT" "--referee-key HEX" -- verify --help
help "campaign" "--games N=10000" "--seed S=1" -- campaign --help
help "scenario" "run" "graph" -- scenario --help
help "scenario run" "Usage: tribunal scenario run" "--json" "--verbose" "--threads K=1" "--work DIR" -- scenario run --help
help "scenario graph" "Usage: tribunal scenario graph" "JOB.toml" -- scenario graph --help
# `tribunal help COMMAND` is `tribunal COMMAND --help`; `tribunal help` the list of commands.
help "help train" "Usage: tribunal train" "--steps N" "--progress-seconds SECONDS=10" -- help train
help "help scenario run" "Usage: tribunal scenario run" "--json" -- help scenario run
help "help" "Usage: tribunal" "delegate" "--version" "tribunal help COMMAND" -- help
help "node options' environment variables" "(Env:TRIBUNAL_LISTEN)" "(Env:TRIBUNAL_KEY)" "(Env:TRIBUNAL_STORE)" \
  "(Env:TRIBUNAL_REFEREE_KEY)" "(Env:TRIBUNAL_LOG_FORMAT)" -- provider --help
help "--json everywhere" "--json" -- verify --help
help "keygen --json" "--json" -- keygen --help
help "report --json" "--json" -- report --help
help "delegate --json" "--json" "--progress-seconds SECONDS=10" "(Env:TRIBUNAL_REFEREE)" -- delegate --help
# A missing command is a usage error that lists the commands (on stderr).
"$bin" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "referee" "$tmp/err" || [ -s "$tmp/out" ]; then
  echo "FAIL no command: exit $rc (want 2 and the commands on stderr)"; fail=1
else
  echo "ok   no command: exit 2, the commands on stderr"
fi
exit $fail
