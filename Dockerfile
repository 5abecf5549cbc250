# The pykueue controller image: `pykueue controller` with its webhook server.
#
#   make image                      # here: buildah, a Debian base made by debootstrap (hack/build-image)
#   docker build -t pykueue:0.1.0 . # elsewhere: the same file on debian:bookworm-slim
#   pykueue manifests --image pykueue:0.1.0 | kubectl apply --server-side -f -
#
# Both stages start from the same Debian base, so the venv built in the first one finds its interpreter
# (/usr/bin/python3, Debian's Python 3.11) at the same path in the second. The final stage holds Debian's
# python3, the venv and nothing else: no compiler, no pip, no apt lists, and it runs as an unprivileged
# user on a read-only root file system (the Deployment mounts an emptyDir on /tmp).
ARG BASE=docker.io/library/debian:bookworm-slim

FROM ${BASE} AS build
# PIP_CERT: a CA bundle for a TLS-inspecting proxy (hack/build-image passes the build machine's).
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/pykueue
WORKDIR /src
# The dependencies first, in a layer of their own that a change to the code does not rebuild.
COPY pyproject.toml constraints.txt ./
RUN /opt/pykueue/bin/pip install -c constraints.txt --only-binary=:all: \
    $(python3 -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
COPY README.md MANIFEST.in ./
COPY src ./src
RUN /opt/pykueue/bin/pip install --no-deps . \
    && /opt/pykueue/bin/pip uninstall --yes pip setuptools \
    && /opt/pykueue/bin/python -m compileall -q /opt/pykueue/lib

FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
    && groupadd --system --gid 65532 pykueue \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin pykueue
COPY --from=build /opt/pykueue /opt/pykueue
ENV PATH=/opt/pykueue/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 9443
ENTRYPOINT ["pykueue"]
CMD ["controller"]
