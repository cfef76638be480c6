#!/bin/bash
# make check-aarch64: exact mode must save the same bytes on aarch64 as on x86-64.
# Cross-builds minidc with aarch64-linux-gnu-gcc (the Makefile's own rules and flags) into
# build-aarch64/, runs a subset of the tests under qemu-aarch64-static, then trains the tiny
# model with --exact serially and on 2 ranks (tp 2 + sp), and qwen3-tiny serially, on both ISAs
# and compares the checkpoints with cmp and the printed loss lines. Last line: "aarch64: N passed, N failed".
#
# The arm64 libraries (MPICH, OpenBLAS, cJSON and what they load) come as a sysroot: their
# .deb files are fetched with `apt-get download` into build-aarch64/debs/ and unpacked with
# dpkg-deb -x into build-aarch64/sysroot/, once. Never `apt-get install` an :arm64 package
# here: apt satisfies libmpich-dev:arm64 by replacing the amd64 gcc, clang and binutils.
# The C library and libgcc/libgomp/libstdc++ are the cross toolchain's (/usr/aarch64-linux-gnu).
#
# Environment: NATIVE (the x86-64 build to compare with, default build), MPIEXEC, MAKE,
# AARCH64_STEPS (training steps, default 3), AARCH64_NUMERICS=1 (also test_numerics, +9 min).
set -u
cd "$(dirname "$0")/.." || exit 2
NATIVE=${NATIVE:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
MAKE=${MAKE:-make}
STEPS=${AARCH64_STEPS:-3}
OUT=build-aarch64
SR=$PWD/$OUT/sysroot
LIB=$SR/usr/lib/aarch64-linux-gnu
CROSS=/usr/aarch64-linux-gnu
t_start=$(date +%s)

# ---- host packages (all amd64 or arch "all": safe to install) ----
host_pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static"
missing=""
for p in $host_pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
is_root() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
if [ -n "$missing" ]; then
    if is_root; then
        echo "aarch64: installing:$missing" >&2
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 || {
            apt-get update >/dev/null 2>&1
            DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >/dev/null 2>&1; } || {
            echo "aarch64: apt-get install$missing failed; run it by hand to see why" >&2; exit 2; }
    else
        echo "aarch64: missing Debian packages:$missing" >&2
        echo "install them with:  sudo apt-get install -y --no-install-recommends$missing" >&2
        exit 2
    fi
fi

# ---- the arm64 sysroot ----
# libmpich12 loads libgfortran, hwloc and UCX; UCX loads numa, ibverbs, rdmacm (and libnl),
# its InfiniBand module the mlx5 provider (ibverbs-providers); hwloc loads udev. The -dev
# packages bring the headers and the unversioned .so links.
arm_pkgs="libmpich-dev libmpich12 libopenblas-dev libopenblas0 libopenblas-pthread-dev
          libopenblas0-pthread libcjson-dev libcjson1 libgfortran5 libhwloc15 libudev1 libucx0
          libnuma1 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200 libnl-route-3-200"
[ -e $CROSS/lib/libstdc++.so.6 ] || arm_pkgs="$arm_pkgs libstdc++6"
[ -e $CROSS/lib/libgcc_s.so.1 ] || arm_pkgs="$arm_pkgs libgcc-s1"
mkdir -p $OUT/debs
need=""
for p in $arm_pkgs; do
    compgen -G "$OUT/debs/${p}_*_arm64.deb" >/dev/null || need="$need $p:arm64"
done
if [ -n "$need" ]; then
    if ! dpkg --print-foreign-architectures | grep -qx arm64 || ! apt-cache show libmpich12:arm64 >/dev/null 2>&1; then
        if is_root; then
            dpkg --add-architecture arm64 && apt-get update >/dev/null 2>&1
        else
            echo "aarch64: apt knows no arm64 packages; add them (this installs nothing) with:" >&2
            echo "  sudo dpkg --add-architecture arm64 && sudo apt-get update" >&2
            exit 2
        fi
    fi
    echo "aarch64: downloading into $OUT/debs:$need" >&2
    # shellcheck disable=SC2086
    (cd $OUT/debs && apt-get download $need) >$OUT/debs/download.log 2>&1 || {
        tail -n 5 $OUT/debs/download.log >&2
        echo "aarch64: apt-get download failed (log $OUT/debs/download.log)" >&2; exit 2; }
fi
debs=$(cd $OUT/debs && ls ./*_arm64.deb)
if [ "$(cat "$SR/.debs" 2>/dev/null)" != "$debs" ]; then
    rm -rf "$SR" && mkdir -p "$SR"
    for d in "$OUT"/debs/*_arm64.deb; do dpkg-deb -x "$d" "$SR" || exit 2; done
    echo "$debs" >"$SR/.debs"
fi
LIBPATH=$LIB:$LIB/openblas-pthread

pass=0 fail=0 failed=""
report() { # ok|fail name [detail]
    if [ "$1" = ok ]; then pass=$((pass + 1)); printf 'ok      %s\n' "$2"
    else fail=$((fail + 1)); failed="$failed | $2"; printf 'not ok  %s%s\n' "$2" "${3:+  ($3)}"; fi
}

# ---- build: the Makefile's rules and flags (OPT, MDC_CFLAGS, FILE_CFLAGS), another compiler ----
jobs=""
case "${MAKEFLAGS:-}" in *jobserver*) ;; *) jobs=-j$(nproc) ;; esac
t0=$(date +%s)
# shellcheck disable=SC2086
$MAKE $jobs --no-print-directory BUILD=$OUT SANITIZE=0 MPICC=aarch64-linux-gnu-gcc \
    BLAS_INC="-I$SR/usr/include/aarch64-linux-gnu/openblas-pthread" \
    DEP_CFLAGS="-I$SR/usr/include -I$SR/usr/include/aarch64-linux-gnu/mpich" \
    DEP_LDFLAGS="-L$LIB -L$LIB/openblas-pthread -Wl,-rpath-link,$LIB -Wl,-rpath-link,$LIB/openblas-pthread" \
    LDLIBS="-lopenblas -lcjson -lm -lmpich" all tests >$OUT/build.log 2>&1
rc=$?
t_build=$(($(date +%s) - t0))
if [ $rc != 0 ]; then
    grep -E "error|Error" $OUT/build.log | head -n 20
    report fail build "log $OUT/build.log"
    echo "aarch64: build ${t_build}s"
    echo "aarch64: $pass passed, $fail failed"
    exit 1
fi
report ok "build (${t_build}s)"
if file -L $OUT/minidc | grep -q "ARM aarch64"; then report ok "file $OUT/minidc: aarch64"
else report fail "file $OUT/minidc: aarch64" "$(file -L $OUT/minidc)"; fi

# Every library the program and UCX's transport modules need is in the sysroot or the cross
# toolchain (a later Debian may add a dependency: name its package in arm_pkgs above).
unresolved=""
declare -A seen=()
queue=("$OUT/minidc" "$LIB"/ucx/libuct_*.so.0)
while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}; queue=("${queue[@]:1}")
    for n in $(aarch64-linux-gnu-readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [ -n "${seen[$n]:-}" ] && continue
        seen[$n]=1
        hit=""
        for d in $LIB $LIB/openblas-pthread $LIB/ucx $SR/lib/aarch64-linux-gnu $CROSS/lib; do
            [ -e "$d/$n" ] && { hit=$d/$n; break; }
        done
        if [ -n "$hit" ]; then queue+=("$hit"); else unresolved="$unresolved $n(by ${f##*/})"; fi
    done
done
if [ -z "$unresolved" ]; then report ok "sysroot: every needed library present"
else report fail "sysroot: every needed library present" "missing:$unresolved"; fi

# ---- tests under qemu ----
# Under qemu-user, process_vm_readv/writev are not implemented (ENOSYS), so UCX drops its cma
# transport and opens TCP as well; MPI_Finalize then closes the UCX endpoints over TCP, and a
# rank whose peer has already gone on to the PMI barrier polls forever for the peer's answer
# (a hang after the last output, in most 2-rank runs). UCX_TLS=self,sm keeps UCX on shared
# memory, where the close needs no answer. (The native runs keep their defaults.)
QEMU=(qemu-aarch64-static -L "$CROSS" -E "LD_LIBRARY_PATH=$LIBPATH")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
export MINIDC_TIMEOUT=${MINIDC_TIMEOUT:-300}
log=$OUT/test-logs
mkdir -p $log
run_test() { # name ranks timeout [args]: ranks "-" is a plain process
    local name=$1 p=$2 to=$3; shift 3
    local launch=() tag=$name.$p
    [ "$p" != - ] && launch=("$MPIEXEC" -genv UCX_TLS "self,sm" -n "$p")
    local s rc dt; s=$(date +%s.%N)
    timeout -k 5 "$to" "${launch[@]}" "${QEMU[@]}" "$OUT/tests/$name" "$@" </dev/null >"$log/$tag.out" 2>&1
    rc=$?
    dt=$(printf '%.1f' "$(echo "$(date +%s.%N) - $s" | bc)")
    local what="$name n=$p ${dt}s"
    [ "$p" = - ] && what="$name - ${dt}s"
    if [ $rc = 0 ]; then report ok "$what"
    else
        local why="exit $rc"; { [ $rc = 124 ] || [ $rc = 137 ]; } && why="TIMEOUT after ${to}s"
        report fail "$what" "$why; log $log/$tag.out"
        tail -n 10 "$log/$tag.out" | sed 's/^/    # /'
    fi
}
# Not here: test_numerics unless AARCH64_NUMERICS=1 (its long double references are software
# quad precision on aarch64: about 9 minutes under qemu); test_device_options (it bounds the wall time of a host
# measurement, which qemu exceeds); test_doorbell (it names a segment with its own start time
# from /proc/self/stat, which qemu-user emulates a tick off the kernel's /proc/PID/stat that
# the peer reads, so the peer removes it as stale).
t0=$(date +%s)
while read -r name ranks to; do
    [ -z "$name" ] && continue
    for p in ${ranks//,/ }; do run_test "$name" "$p" "$to"; done
done <<'EOF'
test_half            -    60
test_device_clock    -    60
test_device_energy   -    60
test_device_oom      -    60
test_device_json     -    60
test_device_throttle -    60
test_tensorfile      -    60
test_datasets        -    60
test_weights         -    60
test_fuzz_files      -    60
test_dropout         -    60
test_block           -    60
test_attention_pair  -    60
test_attention_gqa   -    60
test_family_kernels  -    120
test_kernel_shapes   -    60
test_dry_kernels     -    120
test_kernels         -    300
test_model           -    200
test_exact           1,2  120
test_transport       2    60
test_coll_conform    2    60
test_coll_order      2    60
test_coll_errors     2    60
test_coll_check      2    60
test_device_report   2    60
test_explain         2    60
test_dp              2    60
test_inflight        2    150
test_tp              2    300
EOF
[ "${AARCH64_NUMERICS:-0}" = 1 ] && run_test test_numerics - 1500
t_tests=$(($(date +%s) - t0))

# ---- exact training: x86-64 and aarch64, serial and tp 2 + sp (and a family serially), the same options ----
runs=$OUT/runs
rm -rf $runs && mkdir -p $runs
train=(train --config tiny --seed 1 --steps "$STEPS" --exact)
t0=$(date +%s)
train_run() { # tag timeout command...
    local tag=$1 to=$2; shift 2
    local s rc; s=$(date +%s)
    timeout -k 5 "$to" "$@" </dev/null >"$runs/$tag.out" 2>&1
    rc=$?
    if [ $rc = 0 ] && [ -s "$runs/$tag.st" ]; then report ok "train $tag $(($(date +%s) - s))s"
    else report fail "train $tag $(($(date +%s) - s))s" "exit $rc; log $runs/$tag.out"
        tail -n 10 "$runs/$tag.out" | sed 's/^/    # /'; fi
}
train_run x86-serial 120 "$NATIVE/minidc" "${train[@]}" --save $runs/x86-serial.st
train_run x86-tp2sp 120 "$MPIEXEC" -n 2 "$NATIVE/minidc" "${train[@]}" --tp 2 --sp --save $runs/x86-tp2sp.st
train_run aarch64-serial 900 "${QEMU[@]}" $OUT/minidc "${train[@]}" --save $runs/aarch64-serial.st
train_run aarch64-tp2sp 900 "$MPIEXEC" -genv UCX_TLS "self,sm" -n 2 "${QEMU[@]}" $OUT/minidc "${train[@]}" \
    --tp 2 --sp --save $runs/aarch64-tp2sp.st
# a family: rotary positions (minidc's own sin and cos), q_norm, k_norm, grouped-query attention, SwiGLU
ftrain=(train --config qwen3-tiny --seed 1 --steps "$STEPS" --exact)
train_run x86-qwen3 120 "$NATIVE/minidc" "${ftrain[@]}" --save $runs/x86-qwen3.st
train_run aarch64-qwen3 900 "${QEMU[@]}" $OUT/minidc "${ftrain[@]}" --save $runs/aarch64-qwen3.st
t_train=$(($(date +%s) - t0))
for pair in x86-serial:x86-tp2sp x86-serial:aarch64-serial x86-serial:aarch64-tp2sp x86-qwen3:aarch64-qwen3; do
    ref=$runs/${pair%%:*} tag=${pair#*:}
    if [ ! -s $ref.st ] || [ ! -s $runs/$tag.st ]; then
        report fail "checkpoint $tag = ${pair%%:*}" "missing"; continue
    fi
    if cmp -s $ref.st $runs/$tag.st; then report ok "checkpoint $tag = ${pair%%:*} (cmp)"
    else
        report fail "checkpoint $tag = ${pair%%:*} (cmp)" "$(cmp $ref.st $runs/$tag.st 2>&1 | head -n 1)"
        # which tensor differs first, bit for bit
        "$NATIVE/minidc" compare $ref.st $runs/$tag.st --rtol 0 --atol 0 --quiet 2>&1 | sed 's/^/    # /'
    fi
    # the loss and gradient norm as printed (not the timings)
    if diff <(awk '$1 == "step" {print $2, $3, $4, $5, $6}' $ref.out) \
            <(awk '$1 == "step" {print $2, $3, $4, $5, $6}' $runs/$tag.out) >$runs/$tag.loss.diff &&
       [ "$(grep -c '^step' $ref.out)" = "$STEPS" ]; then
        report ok "loss lines $tag = ${pair%%:*}"
    else
        report fail "loss lines $tag = ${pair%%:*}" "$runs/$tag.loss.diff"
        head -n 6 $runs/$tag.loss.diff | sed 's/^/    # /'
    fi
done

echo "aarch64: build ${t_build}s, tests ${t_tests}s, training runs ${t_train}s, total $(($(date +%s) - t_start))s"
[ -n "$failed" ] && echo "failed: ${failed# | }"
echo "aarch64: $pass passed, $fail failed"
[ $fail = 0 ]
