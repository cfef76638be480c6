#!/bin/bash
# The test harness. Reads the manifest tests/manifest; each line: KIND NAME RANKS TIMEOUT [ARGS...]
#   KIND     unit, mesh, cli, interposer, xcheck or docs (the manifest says what each holds)
#   NAME     build/tests/NAME (a C test, from tests/KIND/NAME.c) or tests/KIND/NAME (a script: .sh or .py)
#   RANKS    "-" runs it as a plain process; "1,2,3" runs it under $MPIEXEC -n P for each P
#   TIMEOUT  seconds per run; a timeout is a failure, never a hang
# Exit status 77 means skipped. The last line is "N passed, N failed[, N skipped]".
# Usage: tests/run.sh [PATTERN]  (only tests whose name matches the grep pattern); CASE a pattern
# for the scenarios of the scripts that run (tests/cli/scenario.sh); KINDS a comma
# list of kinds to run (default all); MANIFEST another manifest (make check-long: tests/long/manifest).
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
pattern=${1:-}
cd "$(dirname "$0")/.." || exit 2
export BUILD MPIEXEC CASE
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
export MINIDC_TIMEOUT=${MINIDC_TIMEOUT:-60}
slow=1
if [ "${SANITIZE:-0}" = 1 ]; then
    slow=4
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=99}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    # MPICH's hwloc loads its pci plugin (libpciaccess), which leaks ~1 KB and is unloaded
    # before LeakSanitizer runs, so the leak shows as "<unknown module>" and no suppression can
    # name it. PCI topology is of no use to the tests: leave that plugin out.
    export HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci}
fi
log=$BUILD/test-logs
mkdir -p "$log"
pass=0 fail=0 skip=0
failed_names=""
# A script's scenarios, one line each: its "ok: LABEL" and "FAIL: LABEL: why" lines (CASE, an
# extended grep pattern, reruns only the scenarios whose label matches: tests/cli/scenario.sh).
scenarios() {
    sed -nE 's/^ok: (.*)/    ok      \1/p; s/^FAIL: (.*)/    not ok  \1/p' "$1"
}
run_one() { # kind name ranks timeout args...
    local kind=$1 name=$2 p=$3 to=$4; shift 4
    local cmd
    if [ -x "$BUILD/tests/$name" ]; then cmd=("$BUILD/tests/$name")
    elif [ -f "tests/$kind/$name" ]; then
        case $name in *.py) cmd=(/usr/bin/python3 "tests/$kind/$name");; *) cmd=(bash "tests/$kind/$name");; esac
    else
        printf 'not ok  %-28s %-6s (missing: no %s or tests/%s/%s)\n' "$name" "$p" "$BUILD/tests/$name" "$kind" "$name"
        fail=$((fail + 1)); failed_names="$failed_names $name"; return
    fi
    local launch=()
    [ "$p" != "-" ] && launch=("$MPIEXEC" -n "$p")
    local tag=${name//\//_}.$p
    # a test listed twice with different arguments: each run has its own log and name
    if [ $# -gt 0 ]; then local a="$*"; tag="$tag.${a//[^A-Za-z0-9._-]/_}"; name="$name $*"; fi
    local t0=$(date +%s.%N)
    # stdin from /dev/null: mpiexec forwards stdin to rank 0 and would eat the rest of the list
    timeout -k 5 $((to * slow)) "${launch[@]}" "${cmd[@]}" "$@" </dev/null >"$log/$tag.out" 2>&1
    local rc=$?
    local dt=$(echo "$(date +%s.%N) - $t0" | bc)
    local ranks="n=$p"; [ "$p" = "-" ] && ranks="-"
    if [ $rc = 0 ]; then
        printf 'ok      %-28s %-6s %6.2fs\n' "$name" "$ranks" "$dt"; pass=$((pass + 1))
        scenarios "$log/$tag.out"
    elif [ $rc = 77 ]; then
        printf 'skip    %-28s %-6s %6.2fs  %s\n' "$name" "$ranks" "$dt" "$(tail -n 1 "$log/$tag.out")"; skip=$((skip + 1))
    else
        local why="exit $rc"; [ $rc = 124 ] || [ $rc = 137 ] && why="TIMEOUT after $((to * slow))s"
        printf 'not ok  %-28s %-6s %6.2fs  (%s; log %s)\n' "$name" "$ranks" "$dt" "$why" "$log/$tag.out"
        scenarios "$log/$tag.out"
        tail -n 15 "$log/$tag.out" | sed 's/^/    # /'
        fail=$((fail + 1)); failed_names="$failed_names ${name// /_}.$p"
    fi
}
manifest=${MANIFEST:-tests/manifest}
all_kinds=unit,mesh,cli,interposer,xcheck,docs
kinds=",${KINDS:-$all_kinds},"
while read -r kind name ranks to args; do
    case $kind in ''|'#'*) continue;; esac
    case ",$all_kinds," in *",$kind,"*) ;;
        *) echo "not ok  $manifest: unknown kind '$kind' (line: $kind $name)"; fail=$((fail + 1)); continue;; esac
    case $kinds in *",$kind,"*) ;; *) continue;; esac
    [ -n "$pattern" ] && ! echo "$name" | grep -q -- "$pattern" && continue
    if [ "$ranks" = "-" ]; then run_one "$kind" "$name" - "$to" $args
    else for p in ${ranks//,/ }; do run_one "$kind" "$name" "$p" "$to" $args; done; fi
done < "$manifest"
[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ $fail = 0 ]
