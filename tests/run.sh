#!/usr/bin/env bash
# Runs every test executable given (files or folders of them), shows their output, and ends with
# the total "N passed, N failed, N skipped" (a skip is not a pass). An executable that crashes or
# prints no summary counts as one failure. Extra environment for all of them can be passed as
# NAME=value before the paths. -jN first runs N at a time (the output still comes in order, each
# test's as a whole).
set -u
par=1
case "${1:-}" in -j*) par=${1#-j}; shift ;; esac
[ "$par" -ge 1 ] 2>/dev/null || par=1
envs=()
exes=()
for a in "$@"; do
  case "$a" in
    *=*) envs+=("$a") ;;
    *) if [ -d "$a" ]; then while IFS= read -r e; do exes+=("$e"); done < <(find "$a" -maxdepth 1 -type f -perm -u+x | sort)
       else exes+=("$a"); fi ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=${#exes[@]}
passed=0
failed=0
skipped=0
next=0

# Adds up and shows the results of the tests that have finished, in the order given.
report_ready() {
  while [ "$next" -lt "$n" ] && [ -f "$tmp/$next.rc" ]; do
    local exe=${exes[$next]} out rc summary p_n f_n s_n
    out=$(cat "$tmp/$next.out")
    rc=$(cat "$tmp/$next.rc")
    next=$((next + 1))
    echo "== $exe ${envs[*]:-}"
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
}

for ((i = 0; i < n; i++)); do
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n 2>/dev/null; report_ready; done
  ( env "${envs[@]}" "${exes[$i]}" > "$tmp/$i.out" 2>&1; echo $? > "$tmp/$i.tmp"; mv "$tmp/$i.tmp" "$tmp/$i.rc" ) &
  report_ready
done
while [ "$next" -lt "$n" ]; do wait -n 2>/dev/null || sleep 0.1; report_ready; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
