#!/usr/bin/env bash
# The steps both images share (docker/embedded.Dockerfile, docker/Dockerfile), run as root while building:
# the system libraries of scripts/setup.sh (per-worker Xvfb, Mesa's GL, EGL and OSMesa, glfw), then tini
# (PID 1: it reaps an Xvfb whose worker was killed) and ffmpeg, and no apt lists left in the layer.
set -euo pipefail
"$(dirname "$0")/../scripts/setup.sh" --system_only
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tini ffmpeg ca-certificates >/dev/null
rm -rf /var/lib/apt/lists/*
