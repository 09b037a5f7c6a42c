# The GPU worker for Jetson boards (Orin, Nano): the CUDA libtorch of NVIDIA's L4T PyTorch
# image, the gRPC stack built from pinned sources (its Ubuntu 20.04 packages are too old). The
# base must match the boards' JetPack/L4T release (build arguments below). Not built on the
# project's CI machines (no arm64 GPU, bases from nvcr.io); see README "Images".
#
#   docker buildx build --platform linux/arm64 -f docker/gpu-worker-jetson.Dockerfile \
#     --build-arg L4T_BASE=nvcr.io/nvidia/l4t-pytorch:r35.2.1-pth2.0-py3 -t REGISTRY/gpu-worker:TAG-jetson .

ARG L4T_BASE=nvcr.io/nvidia/l4t-pytorch:r35.2.1-pth2.0-py3
FROM ${L4T_BASE} AS builder
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      build-essential git ninja-build pkg-config curl ca-certificates libssl-dev \
      libyaml-cpp-dev libeigen3-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
ARG CMAKE_VERSION=3.25.3
RUN curl -fsSL https://github.com/Kitware/CMake/releases/download/v${CMAKE_VERSION}/cmake-${CMAKE_VERSION}-linux-aarch64.tar.gz \
      | tar -xz --strip-components=1 -C /usr/local
COPY docker/build-grpc-stack.sh /tmp/
ARG BUILD_JOBS=4
RUN BUILD_JOBS=${BUILD_JOBS} /tmp/build-grpc-stack.sh
WORKDIR /src
COPY CMakeLists.txt ./
COPY proto proto
COPY services services
# The base's PyTorch ships libtorch and its CMake config inside the Python package.
RUN torch_cmake=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "share/cmake"))') \
    && cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDHPT_BUILD_TESTS=OFF \
         -DDHPT_BUILD_BENCHMARKS=OFF -DDHPT_NATIVE=OFF -DCMAKE_PREFIX_PATH="/opt/dhpt-deps;${torch_cmake}" \
    && cmake --build /build --target dhpt-gpu-worker && strip /build/bin/dhpt-gpu-worker \
    && strip --strip-unneeded /build/bin/libdhpt_autoencoder.so /build/bin/libdhpt_xgboost.so

# The runtime stays on the same base: its CUDA, cuDNN and libtorch libraries are the ones the
# board's driver matches. The compilers are removed.
FROM ${L4T_BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="dhpt-gpu-worker" \
      org.opencontainers.image.description="DHPT GPU worker, L4T CUDA libtorch (Jetson)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/dhpt/dhpt" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends libyaml-cpp0.6 \
    && apt-get purge -y -qq gcc g++ cpp 2>/dev/null || true \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 dhpt && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin dhpt
COPY --from=builder /opt/dhpt-deps/lib /opt/dhpt-deps/lib
COPY --from=builder /build/bin/dhpt-gpu-worker /usr/local/bin/dhpt-gpu-worker
# The AutoEncoder's libtorch code, loaded at the first trial from ../lib/dhpt/ beside the binary.
COPY --from=builder /build/bin/libdhpt_autoencoder.so /usr/local/lib/dhpt/libdhpt_autoencoder.so
# The XGBoost code (--run-cpu-models), likewise loaded at the first XGBoost trial.
COPY --from=builder /build/bin/libdhpt_xgboost.so /usr/local/lib/dhpt/libdhpt_xgboost.so
RUN echo /opt/dhpt-deps/lib > /etc/ld.so.conf.d/dhpt.conf && \
    python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' >> /etc/ld.so.conf.d/dhpt.conf && ldconfig
USER 10001:10001
EXPOSE 9465
ENTRYPOINT ["/usr/local/bin/dhpt-gpu-worker"]
