#!/usr/bin/env bash
# Installs every dependency of the MRC testbed from Debian/Ubuntu packages.
# Idempotent and non-interactive: safe to run on every CI start.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# Build toolchain and test frameworks.
PKGS_BUILD="build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-dev git"
PKGS_TEST="libgtest-dev libgmock-dev googletest libbenchmark-dev"
# Codec, tools and checker.
PKGS_WIRE="libpcap-dev libtins-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev tshark tcpdump python3-scapy"
# Runtime, testbed and injector (namespaces, SRv6, Mininet under Debian's python3).
PKGS_NET="iproute2 ethtool iputils-ping socat iperf3 nftables iptables mininet bridge-utils python3"
# Plots of the simulation experiments (bench/sim_experiments.py).
PKGS_PLOT="python3-matplotlib"
# Viewer (Qt 6 Widgets, offscreen rendering).
PKGS_GUI="qt6-base-dev qt6-svg-dev libgl-dev libxkbcommon-dev fonts-dejavu-core"
# SoftRoCE lab (lab/): qemu (TCG) + busybox for the guest, rdma-core/perftest copied into it.
# The Debian kernel package is downloaded and extracted by `mrct lab prepare`, never installed.
PKGS_LAB="qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers perftest"
# SoftMRC (reference-impl/provider): lib_mrc.so is built against <infiniband/verbs.h>.
PKGS_PROVIDER="libibverbs-dev"

missing=()
for p in $PKGS_BUILD $PKGS_TEST $PKGS_WIRE $PKGS_NET $PKGS_GUI $PKGS_LAB $PKGS_PROVIDER $PKGS_PLOT; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
# tshark asks whether non-root users may capture; answer once, non-interactively.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
