#!/usr/bin/env bash
# Packs what scripts/gpu-check/run-on-gpu.sh needs to verify the CUDA path of dhpt-gpu-worker on
# a machine that has a GPU and a CUDA libtorch (PyTorch's, from pip) but no Debian packages:
# the portable build's binaries, objects and static libraries, the Debian runtime libraries
# they load, the headers the AutoEncoder trainer compiles against, and the two link lines.
# The trainer itself is compiled there, against that CUDA libtorch.
#   scripts/gpu-check/make-bundle.sh BUILD_DIR   (configured with -DDHPT_NATIVE=OFF)
# Writes .devcheck/bundle.tar.xz (ignored by git).
set -euo pipefail
build=${1:?usage: make-bundle.sh BUILD_DIR (a build configured with -DDHPT_NATIVE=OFF)}
root=$(cd "$(dirname "$0")/../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,lib,obj,include}

# libdhpt_xgboost.so: the XGBoost code the workers load at their first XGBoost trial, beside
# them (services/worker/xgboost_module.h); ldd below bundles the XGBoost it loads.
cp "$build"/bin/{dhpt,dhpt-scheduler,dhpt-cpu-worker,libdhpt_xgboost.so} "$stage/bin/"
cp "$build/services/worker/CMakeFiles/dhpt-gpu-worker.dir/gpu_worker_main.cc.o" "$stage/obj/"
cp "$build/tests/CMakeFiles/autoencoder_test.dir/worker/autoencoder_trainer_test.cc.o" "$stage/obj/"
find "$build" -name 'libdhpt_*.a' ! -name libdhpt_autoencoder.a -exec cp {} "$stage/obj/" \;

# The link lines CMake wrote, with Debian's libtorch taken out (the CUDA one goes in there),
# our static libraries and Debian's shared ones pointed into the bundle.
link_line() {
  tr ' ' '\n' <"$1" | grep -v -E '^$|^/usr/bin/c\+\+$|^-o$|bin/|torch|libc10|glog|gflags|^-Wl,--as-needed$' |
    sed -E -e 's#^(\.\./)*([a-z_]+/)*(libdhpt_[a-z_]+\.a)$#@B@/obj/\3#' \
      -e 's#^.*/(gpu_worker_main\.cc\.o|autoencoder_trainer_test\.cc\.o)"?$#@B@/obj/\1#' \
      -e 's#^/usr/lib/x86_64-linux-gnu/#@B@/lib/#' -e 's#^-L/usr/lib/x86_64-linux-gnu$#-L@B@/lib#' |
    tr '\n' ' '
}
link_line "$build/services/worker/CMakeFiles/dhpt-gpu-worker.dir/link.txt" >"$stage/link-gpu-worker.txt"
link_line "$build/tests/CMakeFiles/autoencoder_test.dir/link.txt" >"$stage/link-autoencoder-test.txt"

# Every Debian library those lines and the binaries name, under the names they use.
{
  cat "$stage"/link-*.txt | tr ' ' '\n' | sed -n 's#^@B@/lib/##p'
  echo libre2.so
  for b in "$stage"/bin/*; do ldd "$b" | awk '$3 ~ /^\// {print $3}' | xargs -n1 basename; done
} | sort -u | while read -r name; do
  case $name in libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*) continue ;; esac
  src=/usr/lib/x86_64-linux-gnu/$name
  [[ -e $src ]] || src=/lib/x86_64-linux-gnu/$name
  cp -L "$src" "$stage/lib/$name"
done
# What those libraries load in turn.
for lib in "$stage"/lib/*.so*; do
  ldd "$lib" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r path; do
  name=$(basename "$path")
  case $name in libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*) continue ;; esac
  [[ -e $stage/lib/$name ]] || cp -L "$path" "$stage/lib/$name"
done

cp -r /usr/include/absl "$stage/include/"
mkdir -p "$stage/include/google"
cp -r /usr/include/google/protobuf "$stage/include/google/"
cp -r /usr/include/gtest /usr/include/gmock "$stage/include/"
mkdir -p "$stage/include/dhpt/v1"
cp "$build"/proto/dhpt/v1/*.pb.h "$stage/include/dhpt/v1/"

mkdir -p "$root/.devcheck"
tar -C "$stage" -cJf "$root/.devcheck/bundle.tar.xz" .
du -h "$root/.devcheck/bundle.tar.xz"
