"""Container engines (docker buildx, podman, buildah): detection, image inspection, reads, pushes, copies."""
