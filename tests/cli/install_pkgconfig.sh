#!/bin/bash
# `make install PREFIX=tmp` installs headers, libraries, minidc.pc and the binary, and a tiny
# program compiles against it with pkg-config and runs (vr300 / a100-80 = 15.7x).
# Three scenarios (tests/cli/scenario.sh); the install runs when any is selected, the compile
# when the compile or the run is.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
fail=0
inst="make install: headers, libraries, minidc.pc and the binary"
cc="a program compiles against the install with pkg-config"
runs="the installed program runs: vr300 / a100-80 = 15.7x"
scenario "$inst" || scenario "$cc" || scenario "$runs" || exit 0
t=$(mktemp -d /tmp/minidc-install-XXXXXX)
trap 'rm -rf "$t"' EXIT
san=""; [ "${SANITIZE:-0}" = 1 ] && san="-fsanitize=address,undefined"
make --no-print-directory -s install PREFIX="$t" BUILD="$BUILD" SANITIZE="${SANITIZE:-0}" >"$t/log" 2>&1 ||
    { flunk "$inst" "make install failed"; cat "$t/log"; exit 1; }
for f in include/minidc/minidc.h include/minidc/device.h lib/libminidc.a lib/libminidc.so lib/pkgconfig/minidc.pc bin/minidc; do
    [ -e "$t/$f" ] || { flunk "$inst" "$f not installed"; exit 1; }
done
scenario "$inst" && pass "$inst"
scenario "$cc" || scenario "$runs" || exit $fail
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
    { flunk "$cc" "compiling against the installed minidc"; exit 1; }
scenario "$cc" && pass "$cc"
if scenario "$runs"; then
    out=$(LD_LIBRARY_PATH="$t/lib" "$t/tiny")
    if [ "$out" = "15.7x" ]; then pass "$runs"; echo "installed and compiled against $t: $out"
    else flunk "$runs" "tiny program printed '$out'"; fi
fi
exit $fail
