#!/usr/bin/env bash
# Builds the pinned gRPC stack (gRPC with its bundled Abseil, protobuf, c-ares and re2),
# prometheus-cpp and XGBoost into /opt/dhpt-deps, for bases whose own packages are too old
# (Ubuntu 20.04/22.04 under the NVIDIA CUDA and L4T images). Versions match Debian 12's, which
# the project is tested with. Used by gpu-worker-cuda.Dockerfile and gpu-worker-jetson.Dockerfile.
set -euo pipefail
prefix=/opt/dhpt-deps
jobs=${BUILD_JOBS:-$(nproc)}
GRPC_VERSION=${GRPC_VERSION:-v1.51.1}
PROMETHEUS_CPP_VERSION=${PROMETHEUS_CPP_VERSION:-v1.0.1}
XGBOOST_VERSION=${XGBOOST_VERSION:-v1.7.4}
cd /tmp
git clone --depth 1 --recurse-submodules --shallow-submodules -b "$GRPC_VERSION" https://github.com/grpc/grpc
cmake -S grpc -B grpc/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$prefix \
  -DgRPC_INSTALL=ON -DgRPC_BUILD_TESTS=OFF -DABSL_PROPAGATE_CXX_STD=ON -DCMAKE_CXX_STANDARD=17 \
  -DgRPC_SSL_PROVIDER=package
cmake --build grpc/build --parallel "$jobs" && cmake --install grpc/build
git clone --depth 1 --recurse-submodules -b "$PROMETHEUS_CPP_VERSION" https://github.com/jupp0r/prometheus-cpp
cmake -S prometheus-cpp -B prometheus-cpp/build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=$prefix -DENABLE_PUSH=OFF -DENABLE_COMPRESSION=OFF -DENABLE_TESTING=OFF
cmake --build prometheus-cpp/build --parallel "$jobs" && cmake --install prometheus-cpp/build
git clone --depth 1 --recurse-submodules -b "$XGBOOST_VERSION" https://github.com/dmlc/xgboost
cmake -S xgboost -B xgboost/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$prefix
cmake --build xgboost/build --parallel "$jobs" && cmake --install xgboost/build
rm -rf /tmp/grpc /tmp/prometheus-cpp /tmp/xgboost
