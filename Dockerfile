# The kube-nudge controller image: the product wheel only (never devtools/), its dependencies
# at the pins and hashes of requirements/image-runtime.lock (the dev lock's, which the tests
# ran with), as a non-root user. The build stage's tools (pip, setuptools, wheel) stay there.
#
#   docker build -t kube-nudge:0.1.0 .
#
# No image is published yet; tests/unit/test_packaging.py checks this file against the wheel
# and the Helm chart (entrypoint, user), since no container engine runs in CI.
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1
WORKDIR /src
COPY requirements/image-build.lock requirements/image-runtime.lock /src/requirements/
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --no-deps -r requirements/image-build.lock
COPY pyproject.toml README.md LICENSE /src/
COPY src /src/src
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/kube-nudge \
 && /opt/build/bin/pip --python /opt/kube-nudge/bin/python install \
        --require-hashes --no-deps -r requirements/image-runtime.lock \
 && /opt/build/bin/pip --python /opt/kube-nudge/bin/python install --no-deps /wheels/*.whl

FROM ${PYTHON_IMAGE}
# The venv's interpreter is the base image's, at the same path as in the build stage.
COPY --from=build /opt/kube-nudge /opt/kube-nudge
ENV PATH=/opt/kube-nudge/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# 65532: the conventional "nonroot" uid; the chart runs the pod as it (runAsUser).
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["kube-nudge"]
CMD ["run"]
