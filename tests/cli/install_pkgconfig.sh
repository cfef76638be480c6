#!/bin/bash
# `make install PREFIX=tmp` installs headers, libraries, minidc.pc and the binary, and a tiny
# program compiles against it with pkg-config and runs (vr300 / a100-80 = 15.7x).
BUILD=${BUILD:-build}
t=$(mktemp -d /tmp/minidc-install-XXXXXX)
trap 'rm -rf "$t"' EXIT
san=""; [ "${SANITIZE:-0}" = 1 ] && san="-fsanitize=address,undefined"
make --no-print-directory -s install PREFIX="$t" BUILD="$BUILD" SANITIZE="${SANITIZE:-0}" >"$t/log" 2>&1 ||
    { echo "FAIL: make install"; cat "$t/log"; exit 1; }
for f in include/minidc/minidc.h include/minidc/device.h lib/libminidc.a lib/libminidc.so lib/pkgconfig/minidc.pc bin/minidc; do
    [ -e "$t/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
cat >"$t/tiny.c" <<'C'
#include <minidc/minidc.h>
int main(void) {
    mdc_device_spec s, a;
    MDC_CHECK(mdc_preset_find("vr300", &s));
    MDC_CHECK(mdc_preset_find("a100-80", &a));
    printf("%.1fx\n", s.hbm_bw / a.hbm_bw);
    return 0;
}
C
export PKG_CONFIG_PATH="$t/lib/pkgconfig"
mpicc.mpich $san $(pkg-config --cflags minidc) "$t/tiny.c" -o "$t/tiny" $(pkg-config --libs minidc) ||
    { echo "FAIL: compiling against the installed minidc"; exit 1; }
out=$(LD_LIBRARY_PATH="$t/lib" "$t/tiny")
[ "$out" = "15.7x" ] || { echo "FAIL: tiny program printed '$out'"; exit 1; }
echo "installed and compiled against $t: $out"
