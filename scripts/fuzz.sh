#!/usr/bin/env bash
# fuzz.sh runs every native Go fuzz target in the repository (func FuzzXxx in
# a _test.go file) for FUZZTIME each, one at a time, and fails if any fails.
# Targets are found with `go test -list '^Fuzz'`, so new ones are picked up by
# themselves. Each target's committed seed corpus (testdata/fuzz/FuzzXxx/) also
# runs in every plain `go test`; this script is the short fuzzing run CI adds.
#
#   scripts/fuzz.sh                            every target, 4s each
#   FUZZTIME=1m scripts/fuzz.sh ./codefile     longer, one package
#
# Some targets use PostgreSQL (pgtest): DATABASE_URL is used when set, else
# scripts/pgup.sh finds or starts one, as `make test` does. `go test` writes a
# failing input to the package's testdata/fuzz/FuzzXxx/ (the corpus): commit it
# with the fix, so the bug stays fixed. No -race: it is too slow for this.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-4s}
# Minimizing a newly interesting input may otherwise take a whole short run.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-200x}

if [ -z "${DATABASE_URL:-}" ]; then
  DATABASE_URL=$(scripts/pgup.sh)
  export DATABASE_URL
fi

# Packages with a test file that declares a fuzz target; `go test -list` then
# says which targets it really has (build tags, typos in the signature).
listing=$(go list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' "${@:-./...}")
pkgs=()
while read -r pkg dir files; do
  [ -n "$files" ] || continue
  # shellcheck disable=SC2086 # files is a list
  if (cd "$dir" && grep -qE '^func Fuzz[A-Z0-9_]' $files); then pkgs+=("$pkg"); fi
done <<<"$listing"

start=$SECONDS
targets=0
failed=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in "${pkgs[@]}"; do
  list=$(go test -list '^Fuzz' "$pkg")
  for name in $(grep -E '^Fuzz' <<<"$list" || true); do
    targets=$((targets + 1))
    t0=$SECONDS
    if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" >"$log" 2>&1; then
      printf 'ok    %-40s %s (%ds)\n' "$name" "$pkg" $((SECONDS - t0))
    else
      printf 'FAIL  %-40s %s (%ds)\n' "$name" "$pkg" $((SECONDS - t0))
      sed 's/^/      /' "$log" | tail -n 40
      failed+=("$pkg $name")
    fi
  done
done

if [ "$targets" -eq 0 ]; then
  echo "fuzz.sh: no fuzz targets found" >&2
  exit 1
fi
echo "fuzz.sh: $targets targets, $((SECONDS - start))s"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'fuzz.sh: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
