#!/usr/bin/env bash
# `cmake --install` of lib_mrc.so into a scratch prefix, then an application built the way the
# README says (`cc app.c $(pkg-config --cflags --libs mrc)`), run against the installed library.
# Usage: install_test.sh BUILD_DIR SOURCE_C
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
libdir=$(find "$tmp/prefix" -name 'lib_mrc.so.1' -printf '%h\n' | head -1)
[ -n "$libdir" ] || { echo "lib_mrc.so.1 not installed"; cat "$tmp/install.log"; exit 1; }
for f in lib_mrc.so lib_mrc.so.1.0.0 pkgconfig/mrc.pc; do
  [ -e "$libdir/$f" ] || { echo "missing $libdir/$f"; exit 1; }
done
for h in mrc.h mrc_ctl.h mrc_api_ver.h mrc_ctl_api_ver.h; do
  [ -f "$tmp/prefix/include/mrc/$h" ] || { echo "missing include/mrc/$h"; exit 1; }
done
soname=$(objdump -p "$libdir/lib_mrc.so.1.0.0" | awk '/SONAME/ {print $2}')
[ "$soname" = "lib_mrc.so.1" ] || { echo "soname is '$soname'"; exit 1; }
export PKG_CONFIG_PATH="$libdir/pkgconfig"
flags=$(pkg-config --cflags --libs mrc)
case "$flags" in
  *-l_mrc*-libverbs*) ;;
  *) echo "pkg-config must put -l_mrc before -libverbs: $flags"; exit 1 ;;
esac
# A sanitizer build of the library needs its runtime loaded first: build the app with it too.
san=""
# (ldd's output goes to a file first: `ldd | grep -q` under pipefail fails when grep exits early
# and ldd dies of SIGPIPE.)
ldd "$libdir/lib_mrc.so.1" > "$tmp/ldd.lib"
if grep -q libasan "$tmp/ldd.lib"; then san="-fsanitize=address,undefined"; fi
# shellcheck disable=SC2086
cc -Wall -Wextra $san -o "$tmp/app" "$src" $flags -Wl,-rpath,"$libdir"
ldd "$tmp/app" > "$tmp/ldd.app"
grep -qF "$libdir/lib_mrc.so.1" "$tmp/ldd.app" || { echo "app does not load $libdir/lib_mrc.so.1:"; cat "$tmp/ldd.app"; exit 1; }
set +e
"$tmp/app" > "$tmp/out" 2>&1  # no arguments: the usage message and exit 2
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "app exited $rc"; cat "$tmp/out"; exit 1; }
echo "installed and linked: $flags"
