#!/usr/bin/env bash
# The CUDA check of dhpt-gpu-worker, run on a machine with an NVIDIA GPU and PyTorch (for its
# CUDA libtorch) from the repository root, with .devcheck/bundle.tar.xz made here by
# scripts/gpu-check/make-bundle.sh. It compiles the AutoEncoder trainer's library against that
# libtorch, links dhpt-gpu-worker and the AutoEncoder unit tests, runs the tests (the device test then
# expects cuda:0), a local AutoEncoder study whose trials must report cuda:0 and NVML's GPU
# figures, and dhpt compare on it. Results go to $OUT (default /tmp/gpu-check).
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
b=/tmp/dhpt-bundle
rm -rf "$b" && mkdir -p "$b" && tar -C "$b" -xJf .devcheck/bundle.tar.xz
step() { echo; echo "=== $*"; }

step machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
g++ --version | head -1
torch=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI)'
site=$(dirname "$torch")
cuda_dirs=$(find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
nvml_dir=$(dirname "$(ldconfig -p | awk '/libnvidia-ml.so.1 / {print $NF; exit}')" 2>/dev/null)
export LD_LIBRARY_PATH="$b/lib:$torch/lib:$cuda_dirs${nvml_dir:+$nvml_dir:}/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"

step "compile the trainer against torch $torch"
flags=(-std=c++20 -O2 -DNDEBUG -DDHPT_VERSION='"0.1.0"' -I. -I"$b/include" -isystem "$torch/include"
       -isystem "$torch/include/torch/csrc/api/include" -D_GLIBCXX_USE_CXX11_ABI=1 -w)
g++ "${flags[@]}" -c services/worker/autoencoder_trainer.cc -o "$b/obj/autoencoder_trainer.o" || exit 1
ar rcs "$b/obj/libdhpt_autoencoder.a" "$b/obj/autoencoder_trainer.o"
torch_libs=(-L"$torch/lib" -Wl,--no-as-needed -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda
            -Wl,--as-needed -Wl,-rpath-link,"$b/lib")
# The libtorch code is a library of its own that the worker loads at its first AutoEncoder trial
# (services/worker/autoencoder_module.h); the worker and the test link no libtorch. It goes
# beside both binaries, where they look for it.
absl_libs=(-L"$b/lib" -l:libabsl_status.so.20220623 -l:libabsl_statusor.so.20220623
           -l:libabsl_strings.so.20220623)
g++ "${flags[@]}" -fPIC -shared services/worker/autoencoder_module.cc -o "$b/bin/libdhpt_autoencoder.so" \
  "${torch_libs[@]}" "${absl_libs[@]}" -Wl,--no-undefined || exit 1
cp "$b/bin/libdhpt_autoencoder.so" "$b/libdhpt_autoencoder.so"
link() {  # link LINE_FILE OUTPUT
  # shellcheck disable=SC2046
  g++ $(sed "s#@B@#$b#g" "$1") -Wl,-rpath-link,"$b/lib" -o "$2"
}
link "$b/link-gpu-worker.txt" "$b/bin/dhpt-gpu-worker" || exit 1
link "$b/link-autoencoder-test.txt" "$b/autoencoder_test" || exit 1
"$b/bin/dhpt-gpu-worker" --version

step "AutoEncoder unit tests (the device test expects cuda:0 here)"
"$b/autoencoder_test" --gtest_brief=1 2>&1 | tee "$out/autoencoder_test.txt" | tail -15
test_status=${PIPESTATUS[0]}

step "a local AutoEncoder study on the GPU worker"
cd /tmp
timeout 300 "$b/bin/dhpt" local --demo=autoencoder --log="$out/local.log" >"$out/local.txt" 2>&1
echo "exit $?"
tail -25 "$out/local.txt"
grep -E "CUDA|cuda|nvml|NVML" "$out/local.log" | head -5

step "dhpt compare on the AutoEncoder demo"
timeout 300 "$b/bin/dhpt" compare --demo=autoencoder --out=/tmp/compare-autoencoder \
  --log="$out/compare.log" >"$out/compare.txt" 2>&1
echo "exit $?"
tail -30 "$out/compare.txt"
tar -C /tmp -czf "$out/compare-autoencoder.tgz" compare-autoencoder
cd - >/dev/null
exit "$test_status"
