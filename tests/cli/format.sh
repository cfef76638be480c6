#!/bin/bash
# Every C source and header of the tree follows .clang-format: a file whose formatted text
# differs fails with the first lines that would change. Releases of clang-format format some
# constructs differently, so the check runs with clang-format 14 (Debian 12's) and is skipped
# (77) without it (apt-get install clang-format-14).
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/scenario.sh
cf=$(command -v clang-format-14 || command -v clang-format)
[ -n "$cf" ] && "$cf" --version | grep -q 'version 14\.' ||
    { echo "skip: no clang-format 14 (Debian 12: apt-get install clang-format-14)"; exit 77; }
fail=0 n=0
for f in $(git ls-files '*.c' '*.h'); do
    scenario "$f" || continue
    n=$((n + 1))
    d=$("$cf" --style=file "$f" | diff "$f" -) || { flunk "$f" "not as .clang-format writes it:"; echo "$d" | head -n 8; }
done
[ $fail = 0 ] && pass "$n C files as .clang-format writes them"
exit $fail
