# kai scheduler image: `kai run` (and `kai webhook`) in a venv, as the non-root user 10001,
# fine with a read-only root filesystem.
#
#   docker build -t kai-scheduler:0.1.0 .          # Docker Hub's python slim image
#   bash image/build.sh                            # no Docker: a Debian base made with mmdebstrap,
#                                                  # built with podman (see image/build.sh)
#
# BASE is any Debian-like image with python3 (3.11) and its venv module: the default is Docker
# Hub's, image/build.sh passes one made from Debian's own packages, so the same file builds
# where Docker Hub cannot be reached.
ARG BASE=python:3.11.11-slim-bookworm

FROM ${BASE} AS build
# Where the network's TLS goes through a proxy with its own CA, pip needs that CA:
# image/build.sh mounts the host's bundle for the RUN steps and names it here. Only this
# stage sees it; the image does not keep it.
ARG PIP_CERT
WORKDIR /src
# Dependencies first (pyproject.toml's list, read with tomllib), so a change to kai's code
# reinstalls kai only. No pip cache; the test suites of pandas and numpy (pulled in by
# OR-Tools) are 60 MB that nothing imports.
COPY pyproject.toml ./
RUN python3 -m venv /opt/kai \
 && /opt/kai/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' > requirements.txt \
 && /opt/kai/bin/pip install --no-cache-dir --disable-pip-version-check -r requirements.txt \
 && site="$(/opt/kai/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
 && rm -rf "$site/pandas/tests" \
 && find "$site/numpy" -depth -type d -name tests -exec rm -rf {} +
COPY README.md ./
COPY kai ./kai
# pip and setuptools leave the venv: nothing installs at run time.
RUN /opt/kai/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps . \
 && /opt/kai/bin/pip uninstall --yes --disable-pip-version-check pip setuptools \
 && /opt/kai/bin/kai --version

FROM ${BASE}
COPY --from=build /opt/kai /opt/kai
# Bytecode is compiled at install time; nothing is written at run time (read-only root works).
ENV PATH=/opt/kai/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Written directly rather than with useradd, which a minimal Debian base does not have.
# The imports check that the base has every library the wheels link to (libstdc++ for numpy
# and OR-Tools), so a base that lacks one fails here, not in the cluster.
RUN echo 'kai:x:10001:10001:kai:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'kai:x:10001:' >> /etc/group \
 && python -c 'import kai.operator.hosting, kai.admission.app, ortools.sat.python.cp_model'
# Numeric, so Kubernetes' runAsNonRoot can check it without a passwd lookup.
USER 10001:10001
EXPOSE 8080 8081 9443
ENTRYPOINT ["kai"]
CMD ["run", "--metrics-port=8080"]
