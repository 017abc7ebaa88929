#!/usr/bin/env bash
# Regenerates the expected outputs of the Soufflé test programs with the Soufflé binary
# (../shared/tools/souffle.xz beside the clone, or $SOUFFLE): for each NAME.dl, the files
# it writes go to NAME/expected/ and what it prints to NAME/stdout.expected.
set -euo pipefail
cd "$(dirname "$0")"
souffle="${SOUFFLE:-}"
if [ -z "$souffle" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  for xz in ../../../shared/tools/souffle.xz ../../../../shared/tools/souffle.xz; do
    if [ -f "$xz" ]; then xz -dc "$xz" > "$tmp/souffle"; chmod +x "$tmp/souffle"; souffle="$tmp/souffle"; break; fi
  done
fi
[ -n "$souffle" ] || { echo "no Soufflé binary: set SOUFFLE" >&2; exit 1; }
for prog in *.dl; do
  name="${prog%.dl}"
  rm -rf "$name/expected"
  mkdir -p "$name/expected"
  "$souffle" -j1 --no-preprocessor -F "$name/facts" -D "$name/expected" "$prog" > "$name/stdout.expected"
done
