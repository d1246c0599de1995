#!/usr/bin/env bash
# Source this at the start of a device-tool command (lent NVIDIA H200, no network):
#   source ci/device/setup.sh
# Installs the carried wheels (.whl/: rocmstack's own deps missing there) and, when .ray2/ is carried
# and the first half of Ray's wheel was stashed by an earlier call (see ci/device/README.md), Ray.
# Everything goes to /root/site, which lives as long as the machine stays warm.
set -e
SITE=/root/site
mkdir -p "$SITE"
if [ -d .whl ] && ! [ -f "$SITE/.whl-done" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
  touch "$SITE/.whl-done"
fi
if [ -d .ray2 ] && [ -f /root/stash/ray.part00 ] && ! [ -d "$SITE/ray" ]; then
  cat /root/stash/ray.part00 .ray2/ray.part01 > /tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
    /tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl .ray2/*.whl
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$SITE/bin:$PATH"
set +e
