# Sourced on the GPU machine from the project's root, after .whl/setup.sh (PyAV, PyCUDA): unpacks
# root.tar.gz beside it (.gst-noble/, made by prepare.sh) into /tmp/gst-noble once while the machine stays warm, and
# points GStreamer, its Python plugin loader and GObject introspection at it. Prints what it found.
_gst=/tmp/gst-noble
_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ ! -e "$_gst/.unpacked" ]; then
  mkdir -p "$_gst" && tar -xzf "$_here/root.tar.gz" -C "$_gst" && touch "$_gst/.unpacked" \
    || { echo "unpacking .gst-noble/root.tar.gz failed" >&2; return 1 2>/dev/null || exit 1; }
fi
_lib=$_gst/usr/lib/x86_64-linux-gnu
export PATH=$_gst/usr/bin:$PATH
export LD_LIBRARY_PATH=$_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GST_PLUGIN_SYSTEM_PATH_1_0=$_lib/gstreamer-1.0
export GST_PLUGIN_SCANNER_1_0=$_lib/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner
export GST_REGISTRY_1_0=/tmp/gst-registry.bin
export GI_TYPELIB_PATH=$_lib/girepository-1.0
# gi for Python 3.12, then the packages of the machine's python3 (NumPy, OpenCV) for the Python
# that GStreamer's plugin loader embeds in gst-launch-1.0 and gst-inspect-1.0
_site=$(python3 -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$_gst/usr/lib/python3/dist-packages:$_site
export GST_PLUGIN_PATH=$(python3 -m streamconv gst-path)
echo "system: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1), $(python3 --version)"
gst-inspect-1.0 --version | head -2
for _element in nvh264dec cudaupload cudaconvert streamconv; do
  if gst-inspect-1.0 --exists "$_element"; then echo "element $_element: here"; else echo "element $_element: MISSING"; fi
done
