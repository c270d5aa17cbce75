#!/usr/bin/env bash
# Runs every test executable given (files or folders of them), shows their output, and ends with
# the total "N passed, N failed, N skipped" (a skip is not a pass). An executable that crashes or
# prints no summary counts as one failure. Extra environment for all of them can be passed as
# NAME=value before the paths.
set -u
envs=()
paths=()
for a in "$@"; do
  case "$a" in *=*) envs+=("$a") ;; *) paths+=("$a") ;; esac
done
passed=0
failed=0
skipped=0
for p in "${paths[@]}"; do
  if [ -d "$p" ]; then list=$(find "$p" -maxdepth 1 -type f -perm -u+x | sort); else list=$p; fi
  for exe in $list; do
    echo "== $exe ${envs[*]:-}"
    out=$(env "${envs[@]}" "$exe" 2>&1)
    rc=$?
    echo "$out" | grep -v '^PASS ' || true
    summary=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' | tail -n 1)
    if [ -z "$summary" ]; then
      echo "!! $exe exited with status $rc and printed no summary"
      failed=$((failed + 1))
      continue
    fi
    read -r p_n _ f_n _ s_n _ <<<"${summary//,/}"
    passed=$((passed + p_n))
    failed=$((failed + f_n))
    skipped=$((skipped + s_n))
    if [ "$rc" -ne 0 ] && [ "$f_n" -eq 0 ]; then
      echo "!! $exe exited with status $rc"
      failed=$((failed + 1))
    fi
  done
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
