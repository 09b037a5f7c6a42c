# Cross-compiles DHPT for linux/arm64 on an amd64 Debian 12 with multiarch: the builder stage of
# docker/Dockerfile when TARGETARCH=arm64 (the file is named after Debian's architecture, as
# TARGETARCH is), or by hand:
#
#   dpkg --add-architecture arm64
#   apt-get install crossbuild-essential-arm64 protobuf-compiler-grpc protobuf-compiler \
#     libgrpc++-dev:arm64 libprotobuf-dev:arm64 libabsl-dev:arm64 libyaml-cpp-dev:arm64 \
#     libsqlite3-dev:arm64 libxgboost-dev:arm64 xgboost:arm64 prometheus-cpp-dev:arm64 libeigen3-dev
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=docker/toolchain-arm64.cmake \
#     -DDHPT_WITH_TORCH=OFF -DDHPT_NATIVE=OFF -DDHPT_BUILD_TESTS=OFF -DDHPT_BUILD_BENCHMARKS=OFF
#
# The arm64 libraries and their CMake configs live in /usr/lib/aarch64-linux-gnu, so the
# sysroot is `/` and CMAKE_LIBRARY_ARCHITECTURE keeps every search in the arm64 folders. The
# programs run at build time are the host's: protoc (FindProtobuf's find_program) and
# grpc_cpp_plugin (gRPC's config imports ${prefix}/bin/grpc_cpp_plugin, which the amd64
# protobuf-compiler-grpc provides: it is Multi-Arch: foreign). xgboost's config checks that
# /usr/bin/xgboost exists: xgboost:arm64 installs it (it is never run).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(DHPT_CROSS_TRIPLET aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${DHPT_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${DHPT_CROSS_TRIPLET}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${DHPT_CROSS_TRIPLET})
set(PKG_CONFIG_EXECUTABLE /usr/bin/${DHPT_CROSS_TRIPLET}-pkg-config CACHE FILEPATH "")
# Build-time programs from the host; libraries, headers and packages for the target only.
set(CMAKE_FIND_ROOT_PATH /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
