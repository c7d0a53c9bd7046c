#!/usr/bin/env bash
# Installs the Debian 12 packages fxcpp needs, only those that are missing.
set -euo pipefail
PKGS="cmake g++ make python3-dev pybind11-dev python3-torch python3-torchvision libtorch-dev libgtest-dev
      libbenchmark-dev python3-pytest python3-pytest-xdist python3-hypothesis python3-tabulate python3-matplotlib graphviz
      nlohmann-json3-dev python3-torchaudio python3-pydot chromium chromium-driver python3-selenium
      python3-pil fonts-dejavu-core"
# `install_deps.sh fuzz`: also what the coverage-guided fuzzer needs (clang, libFuzzer).
[ "${1:-}" = "fuzz" ] && PKGS="$PKGS clang libclang-rt-14-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "fxcpp: installing missing packages:$missing"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
