#!/usr/bin/env bash
# Fetches PyTorch's own torch.fx tests, with the expect files they read, from Debian's `pytorch`
# source package. apt runs with a private sources list, state and cache, so the system's apt
# configuration and package lists are left untouched.
#
#   UPSTREAM_TORCH=1.13  (default) pytorch 1.13.1+dfsg-4 from bookworm, the python3-torch the
#                        1.13 leg is built against, into $UPSTREAM_DIR (default .upstream/):
#                        test/test_fx.py, test/fx/, the TorchScript custom classes TestFX loads
#   UPSTREAM_TORCH=2.14  pytorch 2.14.1+dfsg-1 from sid (the .venv's torch 2.14.1), into
#                        $UPSTREAM_DIR (default .upstream/214/): test/test_fx.py,
#                        test/test_fx_experimental.py, test/fx/, the custom classes.
#                        UPSTREAM_214_VERSION / UPSTREAM_214_SUITE fetch another 2.x instead.
#
# Both also get test/expect/<Class>.* for every test class the extracted files define (the
# backward-compatibility tests compare against them). Idempotent: once src/.complete exists
# nothing is downloaded again; src/.version names the package the tests came from.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
case "${UPSTREAM_TORCH:-1.13}" in
  1.13)
    UP="${UPSTREAM_DIR:-$ROOT/.upstream}"
    VERSION="1.13.1+dfsg-4"                   # the python3-torch the project is built against
    SUITE="${UPSTREAM_SUITE:-bookworm}"
    TESTS=(test/test_fx.py test/fx) ;;
  2.14)
    UP="${UPSTREAM_DIR:-$ROOT/.upstream/214}"
    VERSION="${UPSTREAM_214_VERSION:-2.14.1+dfsg-1}"   # the .venv's torch 2.14.1
    SUITE="${UPSTREAM_214_SUITE:-sid}"
    TESTS=(test/test_fx.py test/test_fx_experimental.py test/fx) ;;
  *) echo "upstream: UPSTREAM_TORCH must be 1.13 or 2.14" >&2; exit 2 ;;
esac
UPSTREAM="${VERSION%%+*}"                     # 1.13.1
# The Debian archive apt is configured with on this machine (its first deb822 URIs or one-line
# `deb` entry), so the sources come from where apt-get takes packages; UPSTREAM_MIRROR overrides.
configured_mirror() {
  { grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
    grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed 's/\[[^]]*\]//' | awk '{print $2}'; } | grep -v -- '-security' | head -n1
  return 0  # a missing sources file is no error (set -e, pipefail); an empty answer is refused below
}
MIRROR="${UPSTREAM_MIRROR:-$(configured_mirror)}"
if [ -z "$MIRROR" ]; then
  echo "upstream: no Debian archive in apt's configuration; set UPSTREAM_MIRROR" >&2; exit 2
fi
SRC="$UP/src"

if [ -f "$SRC/.complete" ] && [ "$(cat "$SRC/.version" 2>/dev/null)" = "pytorch $VERSION ($SUITE)" ]; then
  exit 0
fi

mkdir -p "$UP/apt/lists/partial" "$UP/apt/cache/archives/partial" "$UP/dl"
LIST="$UP/apt/sources.list"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main" > "$LIST"
APT=(apt-get -q
     -o "Dir::Etc::SourceList=$LIST" -o "Dir::Etc::SourceParts=/dev/null"
     -o "Dir::State::Lists=$UP/apt/lists" -o "Dir::Cache=$UP/apt/cache"
     -o "Dir::State::status=/var/lib/dpkg/status" -o "APT::Sandbox::User=root")

shopt -s nullglob
orig=("$UP"/dl/pytorch_"$UPSTREAM"[+.]*orig.tar.*)
if [ ${#orig[@]} -eq 0 ]; then
  echo "upstream: downloading Debian source package pytorch=$VERSION ($MIRROR $SUITE)"
  "${APT[@]}" update
  # The debian.tar (packaging, patches) may be missing from a mirror; the orig tarball is what
  # the tests come from, so a failed download is judged by what landed, checked below.
  (cd "$UP/dl" && "${APT[@]}" source --download-only "pytorch=$VERSION") || true
  orig=("$UP"/dl/pytorch_"$UPSTREAM"[+.]*orig.tar.*)
fi
dsc=("$UP"/dl/pytorch_"$VERSION".dsc)
[ -f "${dsc[0]}" ] && [ ${#orig[@]} -eq 1 ] || {
  echo "upstream: could not download pytorch_$VERSION.dsc and its orig tarball into $UP/dl" >&2; exit 1; }
# The orig tarball must match the checksum the (signed) .dsc lists.
want="$(awk '/^Checksums-Sha256:/{f=1;next} /^[^ ]/{f=0} f && $3 ~ /orig\.tar/{print $1}' "${dsc[0]}")"
have="$(sha256sum "${orig[0]}" | cut -d' ' -f1)"
[ -n "$want" ] && [ "$want" = "$have" ] || { echo "upstream: checksum mismatch for ${orig[0]}" >&2; exit 1; }
deb=("$UP"/dl/pytorch_"$VERSION".debian.tar.*)

# Only the test files the FX suite needs (the whole tree is ~1 GiB unpacked).
rm -rf "$SRC.tmp" && mkdir -p "$SRC.tmp"
tar -tf "${orig[0]}" > "$UP/dl/members.txt"
top="$(sed -n "1s|/.*||p" "$UP/dl/members.txt")"
echo "upstream: extracting ${TESTS[*]} and helpers from $(basename "${orig[0]}")"
want_members=()
for t in "${TESTS[@]}" test/cpp/jit/test_custom_class_registrations.cpp \
         test/cpp/jit/test_custom_class_registrations.h; do
  want_members+=("$top/$t")
done
tar -xf "${orig[0]}" -C "$SRC.tmp" --strip-components=1 "${want_members[@]}"
# The expect files of every test class those files define (assertExpected reads
# test/expect/<Class>.<test>[-<subname>].expect beside the test script).
mapfile -t expect < <("$(dirname "$0")/expect_files.py" "$SRC.tmp" "$top" < "$UP/dl/members.txt")
if [ ${#expect[@]} -gt 0 ]; then
  echo "upstream: extracting ${#expect[@]} expect file(s): ${expect[*]##*/}"
  tar -xf "${orig[0]}" -C "$SRC.tmp" --strip-components=1 "${expect[@]}"
fi
# Debian's patches that touch these files, applied the way dpkg-source would.
if [ ${#deb[@]} -eq 1 ]; then
  tar -xf "${deb[0]}" -C "$SRC.tmp"
else
  echo "upstream: note: pytorch_$VERSION.debian.tar.* unavailable; using the pristine orig tarball"
fi
if [ -f "$SRC.tmp/debian/patches/series" ]; then
  while read -r p _; do
    case "$p" in ''|'#'*) continue ;; esac
    files="$(grep -E '^\+\+\+ ' "$SRC.tmp/debian/patches/$p" | awk '{print $2}' | cut -d/ -f2- || true)"
    hit=0
    for f in $files; do [ -e "$SRC.tmp/$f" ] && hit=1; done
    if [ $hit -eq 1 ]; then
      echo "upstream: applying Debian patch $p"
      # Hunks for files outside the extracted subset are rejected; say so rather than stop.
      patch -s -p1 -f -r - -d "$SRC.tmp" < "$SRC.tmp/debian/patches/$p" \
        || echo "upstream: warning: Debian patch $p did not apply cleanly to the extracted files" >&2
    fi
  done < "$SRC.tmp/debian/patches/series"
fi
rm -rf "$SRC.tmp/debian"
echo "pytorch $VERSION ($SUITE)" > "$SRC.tmp/.version"
touch "$SRC.tmp/.complete"
rm -rf "$SRC" && mv "$SRC.tmp" "$SRC"
echo "upstream: tests in $SRC"
