# The GPU worker for amd64 nodes with NVIDIA GPUs: CUDA libtorch from pytorch.org on an NVIDIA
# CUDA base, the gRPC stack built from pinned sources (docker/build-grpc-stack.sh). Not built on
# the project's CI machines (no GPU, and the bases are pulled from nvcr.io/docker.io); see
# README "Images".
#
#   docker buildx build --platform linux/amd64 -f docker/gpu-worker-cuda.Dockerfile \
#     --build-arg CUDA_VERSION=12.1.1 --build-arg LIBTORCH_URL=... -t REGISTRY/gpu-worker:TAG-cuda .

ARG CUDA_VERSION=12.1.1
ARG UBUNTU_VERSION=22.04
FROM docker.io/nvidia/cuda:${CUDA_VERSION}-cudnn8-devel-ubuntu${UBUNTU_VERSION} AS builder
ARG LIBTORCH_URL=https://download.pytorch.org/libtorch/cu121/libtorch-cxx11-abi-shared-with-deps-2.1.2%2Bcu121.zip
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      build-essential git cmake ninja-build pkg-config curl unzip ca-certificates libssl-dev \
      libyaml-cpp-dev libeigen3-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
# Ubuntu 22.04's cmake (3.22) is older than the project's 3.25: take a pinned release.
ARG CMAKE_VERSION=3.25.3
RUN curl -fsSL https://github.com/Kitware/CMake/releases/download/v${CMAKE_VERSION}/cmake-${CMAKE_VERSION}-linux-x86_64.tar.gz \
      | tar -xz --strip-components=1 -C /usr/local
COPY docker/build-grpc-stack.sh /tmp/
RUN /tmp/build-grpc-stack.sh
RUN curl -fsSL -o /tmp/libtorch.zip "${LIBTORCH_URL}" && unzip -q /tmp/libtorch.zip -d /opt && rm /tmp/libtorch.zip
WORKDIR /src
COPY CMakeLists.txt ./
COPY proto proto
COPY services services
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDHPT_BUILD_TESTS=OFF \
      -DDHPT_BUILD_BENCHMARKS=OFF -DDHPT_NATIVE=OFF -DCMAKE_PREFIX_PATH="/opt/dhpt-deps;/opt/libtorch" \
    && cmake --build /build --target dhpt-gpu-worker && strip /build/bin/dhpt-gpu-worker \
    && strip --strip-unneeded /build/bin/libdhpt_autoencoder.so /build/bin/libdhpt_xgboost.so

FROM docker.io/nvidia/cuda:${CUDA_VERSION}-cudnn8-runtime-ubuntu${UBUNTU_VERSION}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="dhpt-gpu-worker" \
      org.opencontainers.image.description="DHPT GPU worker, CUDA libtorch (amd64)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/dhpt/dhpt" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends libgomp1 libssl3 libyaml-cpp0.7 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 dhpt && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin dhpt
COPY --from=builder /opt/dhpt-deps/lib /opt/dhpt-deps/lib
COPY --from=builder /opt/libtorch/lib /opt/libtorch/lib
COPY --from=builder /build/bin/dhpt-gpu-worker /usr/local/bin/dhpt-gpu-worker
# The AutoEncoder's libtorch code, loaded at the first trial from ../lib/dhpt/ beside the binary.
COPY --from=builder /build/bin/libdhpt_autoencoder.so /usr/local/lib/dhpt/libdhpt_autoencoder.so
# The XGBoost code (--run-cpu-models), likewise loaded at the first XGBoost trial.
COPY --from=builder /build/bin/libdhpt_xgboost.so /usr/local/lib/dhpt/libdhpt_xgboost.so
ENV LD_LIBRARY_PATH=/opt/dhpt-deps/lib:/opt/libtorch/lib
USER 10001:10001
EXPOSE 9465
ENTRYPOINT ["/usr/local/bin/dhpt-gpu-worker"]
