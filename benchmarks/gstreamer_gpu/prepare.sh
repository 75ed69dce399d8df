#!/usr/bin/env bash
# Run from the project's root on a machine with apt and the network (not the GPU machine). Makes
# .gst-noble/: GStreamer 1.24 with gst-python, nvcodec and GObject introspection for Python 3.12, from
# Ubuntu 24.04's archive (the GPU machine's Python is Ubuntu's 3.12.3), pruned to the plugins the
# element's GPU tests and benchmarks/gstreamer.py use, packed as root.tar.gz (about 15 MB), with
# setup.sh beside it. Carry .gst-noble (with .whl) and source .gst-noble/setup.sh there (run.sh).
set -euo pipefail
out=.gst-noble
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work"/apt/lists/partial "$work"/apt/cache/archives/partial "$work"/debs "$work"/root
exclude=$(git rev-parse --git-path info/exclude)  # carried, never committed
grep -qxF "/$out/" "$exclude" 2>/dev/null || echo "/$out/" >> "$exclude"
# Ubuntu's archive key, from Ubuntu's archive over HTTPS; apt checks the package lists with it.
curl -fsSL -o "$work/keyring.deb" \
  https://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb
dpkg -x "$work/keyring.deb" "$work/keyring"
key="$work/keyring/usr/share/keyrings/ubuntu-archive-keyring.gpg"
for suite in noble noble-updates; do
  echo "deb [arch=amd64 signed-by=$key] http://archive.ubuntu.com/ubuntu $suite main universe"
done > "$work/sources.list"
apt_options=(-o "Dir::State=$work/apt" -o "Dir::State::Lists=$work/apt/lists" -o Dir::State::status=/dev/null
             -o "Dir::Cache=$work/apt/cache" -o "Dir::Etc::SourceList=$work/sources.list"
             -o Dir::Etc::SourceParts=/nonexistent -o APT::Architecture=amd64 -o APT::Architectures=amd64)
apt-get "${apt_options[@]}" update -qq
packages=(
  libgstreamer1.0-0 gstreamer1.0-tools libgstreamer-plugins-base1.0-0 gstreamer1.0-plugins-base
  gstreamer1.0-plugins-good libgstreamer-plugins-bad1.0-0 gstreamer1.0-plugins-bad libgstreamer-gl1.0-0
  gstreamer1.0-python3-plugin-loader python3-gst-1.0 python3-gi libgirepository-1.0-1
  gir1.2-glib-2.0 gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gir1.2-gst-plugins-bad-1.0
  liborc-0.4-0t64 libglib2.0-0t64 libunwind8 libdw1t64 libelf1t64 libpython3.12t64 libgudev-1.0-0 libudev1
  # what libgstgl (linked by nvcodec and GstCuda) needs to load; no GL driver is used
  libegl1 libgl1 libglvnd0 libglx0 libx11-6 libx11-xcb1 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
  libdrm2 libgbm1 libwayland-client0 libwayland-cursor0 libwayland-egl1 libwayland-server0
)
(cd "$work/debs" && apt-get "${apt_options[@]}" download "${packages[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed')
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
python3 "$(dirname "${BASH_SOURCE[0]}")/prune.py" "$work/root"
tar -czf "$out/root.tar.gz" -C "$work/root" .
cp "$(dirname "${BASH_SOURCE[0]}")/setup.sh" "$out/setup.sh"
ls -la "$out"
