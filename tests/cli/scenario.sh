# Sourced by the script tests: one result line per scenario, and reruns of one scenario alone.
#   scenario LABEL   true when the scenario LABEL is to run: CASE unset, or LABEL matches the
#                    extended grep pattern CASE (make check TESTS=pp_cli.sh CASE='zb-h1')
#   pass LABEL       prints "ok: LABEL" (tests/run.sh lists it under the script)
#   flunk LABEL WHY  prints "FAIL: LABEL: WHY" and sets fail=1
scenario() { [ -z "${CASE:-}" ] || printf '%s\n' "$1" | grep -qE -- "$CASE"; }
pass() { echo "ok: $1"; }
flunk() { echo "FAIL: $1: $2"; fail=1; }
