#!/usr/bin/env bash
# The source checks CI runs before it builds: every tracked C++ file formatted as .clang-format says
# (clang-format 14, Debian's), and every include pointing down the layers of docs/architecture.md
# (tools/check_layers.py). Fix a format failure with `clang-format -i FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/lint-format.$$; then
  grep -E '^[^ ].*: (error|warning):' /tmp/lint-format.$$ | cut -d: -f1 | sort -u | sed 's/^/not formatted: /'
  rm -f /tmp/lint-format.$$
  echo "lint: run clang-format -i on the files above" >&2
  exit 1
fi
rm -f /tmp/lint-format.$$
echo "lint: ${#files[@]} files formatted"
python3 tools/check_layers.py
