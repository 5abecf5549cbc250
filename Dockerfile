# The pykueue controller image: `pykueue controller` with its webhook server.
#
#   docker build -t pykueue:0.1.0 .
#   pykueue manifests --image pykueue:0.1.0 | kubectl apply --server-side -f -
#
# Stage 1 builds the wheel from this checkout; stage 2 installs it (and only it) with the
# versions pinned in constraints.txt, and runs as an unprivileged user on a read-only
# root file system (the Deployment mounts an emptyDir on /tmp).

FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir "setuptools>=68" wheel
COPY pyproject.toml constraints.txt ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /tmp/wheels
COPY constraints.txt /tmp/constraints.txt
RUN pip install --no-cache-dir -c /tmp/constraints.txt /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels /tmp/constraints.txt \
    && groupadd --system --gid 65532 pykueue \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin pykueue
USER 65532:65532
EXPOSE 9443
ENTRYPOINT ["pykueue"]
CMD ["controller"]
