# Sourced by the script tests: one result line per scenario, and reruns of one scenario alone.
#   scenario LABEL   true when the scenario LABEL is to run: CASE unset, or LABEL matches the
#                    extended grep pattern CASE (make check TESTS=pp_cli.sh CASE='zb-h1'), and
#                    the script's current tier (tier=core, the default, or tier=long: more meshes
#                    of what the core ones check) is the run's (TIER, default core; make check-long
#                    runs a script's long tier: tests/long/manifest)
#   pass LABEL       prints "ok: LABEL" (tests/run.sh lists it under the script)
#   flunk LABEL WHY  prints "FAIL: LABEL: WHY" and sets fail=1
tier=core
scenario() { [ "$tier" = "${TIER:-core}" ] && { [ -z "${CASE:-}" ] || printf '%s\n' "$1" | grep -qE -- "$CASE"; }; }
pass() { echo "ok: $1"; }
flunk() { echo "FAIL: $1: $2"; fail=1; }
