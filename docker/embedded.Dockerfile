# rlbench_vec with its embedded backends (mujoco; mjwarp with --build-arg EXTRAS=gpu,torch): Debian 12,
# Python 3.11, Xvfb, Mesa (GL, EGL, OSMesa), ffmpeg, tini. No CoppeliaSim: that image is docker/Dockerfile.
# Build from the repository root:  docker build -f docker/embedded.Dockerfile -t rlbench_vec:embedded .
# See docker/README.md for running it; scripts/docker_check.sh builds and checks it.
FROM debian:bookworm

# the base steps docker/Dockerfile runs too
COPY scripts/setup.sh /opt/rlbench_vec/scripts/setup.sh
COPY docker/install_base.sh /opt/rlbench_vec/docker/install_base.sh
# (Debian 12's python3-venv, which setup.sh installs, brings its Python 3.11)
RUN /opt/rlbench_vec/docker/install_base.sh && python3 -m venv /opt/venv

# a virtual environment outside /root, so that `docker run --user` works too, and Mesa's shader cache in /tmp:
# under --user $HOME may not be writable (each process would say so)
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MESA_SHADER_CACHE_DIR=/tmp/mesa_shader_cache
# extras of the package, comma-separated. For --backend mjwarp with --gpus all: gpu,torch (mujoco-warp and
# warp-lang; torch from the index, on PyPI a CUDA build: mjwarp hands observations over as torch tensors)
ARG EXTRAS=""
COPY pyproject.toml README.md /opt/rlbench_vec/
COPY rlbench_vec /opt/rlbench_vec/rlbench_vec
RUN pip install --no-cache-dir "/opt/rlbench_vec${EXTRAS:+[$EXTRAS]}"

WORKDIR /workspace
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["python", "-m", "rlbench_vec.bench", "--backend", "mujoco"]
