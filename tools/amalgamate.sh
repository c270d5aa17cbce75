#!/usr/bin/env bash
# Writes mmsched.h from the parts listed in tools/amalgamate.list.
#   tools/amalgamate.sh           regenerate mmsched.h
#   tools/amalgamate.sh --check   fail (exit 1) if the committed mmsched.h is stale
#   tools/amalgamate.sh --stdout  write to standard output
# The output is deterministic: no dates, hosts or paths beyond the part names.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

mode=write
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  --stdout) mode=stdout ;;
  *) echo "usage: tools/amalgamate.sh [--check|--stdout]" >&2; exit 2 ;;
esac

version=$(tr -d ' \n' < VERSION)
IFS=. read -r v_major v_minor v_patch <<<"$version"

generate() {
  local part
  grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' tools/amalgamate.list | while read -r part; do
    case "$part" in
      '!unless '*) printf '#ifndef %s   /* the parts below are left out under this option */\n\n' "${part#!unless }"; continue ;;
      '!end')      printf '#endif\n\n'; continue ;;
    esac
    [ -f "$part" ] || { echo "amalgamate: missing part $part" >&2; exit 1; }
    case "$part" in
      *.txt)  # plain-text manual or license: becomes a comment
        printf '/*\n'
        sed -e 's/[[:space:]]*$//' -e 's/^/   /' -e 's/^[[:space:]]*$//' "$part"
        printf '*/\n' ;;
      *)
        printf '/* ==== begin %s ==== */\n' "$part"
        sed -e 's/[[:space:]]*$//' "$part"
        printf '/* ==== end %s ==== */\n\n' "$part" ;;
    esac
  done | sed -e "s/@MMS_VERSION@/$version/g" -e "s/@MMS_VERSION_MAJOR@/$v_major/g" \
             -e "s/@MMS_VERSION_MINOR@/$v_minor/g" -e "s/@MMS_VERSION_PATCH@/$v_patch/g"
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
generate > "$tmp"

case "$mode" in
  stdout) cat "$tmp" ;;
  write)  cp "$tmp" mmsched.h ;;
  check)
    if ! cmp -s "$tmp" mmsched.h; then
      echo "mmsched.h is stale: it differs from what src/ produces. Run tools/amalgamate.sh and commit." >&2
      diff -u mmsched.h "$tmp" | head -n 20 >&2 || true
      exit 1
    fi
    echo "mmsched.h is up to date" ;;
esac
