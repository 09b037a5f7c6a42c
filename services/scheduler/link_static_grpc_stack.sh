#!/bin/bash
# The link launcher of dhpt-scheduler (RULE_LAUNCH_LINK in CMakeLists.txt beside it): runs
# the link command it is given with the gRPC stack's shared libraries (gRPC, upb, re2, c-ares,
# protobuf, Abseil, OpenSSL) and SQLite replaced by the static archives installed beside them,
# so the scheduler carries only the code it calls instead of mapping some 60 libraries whole
# (docs/benchmarks.md, "Idle memory"). CMake names imported libraries by full path, which the
# linker's -Bstatic does not redirect, hence the rewrite. zlib, prometheus-cpp, civetweb, the C
# and C++ runtimes stay shared: none of them links anything replaced, so no library is loaded
# twice. A replaced library without its archive fails the link with its name.
set -eu
names='(absl_[a-z0-9_]+|grpc(\+\+)?(_[a-z0-9_]+)?|gpr|upb|re2|cares|address_sorting|protobuf|ssl|crypto|sqlite3)'
by_path="/lib$names\\.so(\\.[0-9.]+)?\$" by_name="^-l$names\$"
kept=() archives=() last_archive=-1
for arg in "$@"; do
  if [[ $arg =~ $by_name ]]; then
    archive="-l:lib${arg#-l}.a"  # Found on the linker's search path, as -lNAME would be.
    [[ " ${archives[*]} " == *" $archive "* ]] || archives+=("$archive")
  elif [[ $arg =~ $by_path ]]; then
    archive="${arg%%.so*}.a"
    if [[ ! -f $archive ]]; then
      echo "link_static_grpc_stack.sh: no $archive for $arg; configure with" \
           "-DDHPT_STATIC_SCHEDULER=OFF to link dhpt-scheduler against the shared libraries" >&2
      exit 1
    fi
    [[ " ${archives[*]} " == *" $archive "* ]] || archives+=("$archive")
  else
    [[ $arg == *.a ]] && last_archive=${#kept[@]}
    kept+=("$arg")
  fi
done
# After the project's own archives (their references to gRPC and Abseil must come first) and
# before the shared libraries that follow them (zlib), as one group: the archives refer to each
# other in circles. libcrypto needs libdl and threads.
split=$((last_archive + 1))
exec "${kept[@]:0:split}" -Wl,--start-group "${archives[@]}" -Wl,--end-group -ldl -pthread \
  "${kept[@]:split}"
