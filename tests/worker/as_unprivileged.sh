#!/bin/sh
# Runs a test command as the user nobody when ctest runs as root (root ignores file and
# directory permissions, which some tests are about); as it is otherwise.
if [ "$(id -u)" = 0 ]; then
  exec setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
fi
exec "$@"
