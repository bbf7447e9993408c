#!/usr/bin/env bash
# fuzz.sh runs every native Go fuzz target in the repository (func FuzzXxx in
# a _test.go file) for a budget of executions each, one at a time, and fails
# if any fails.
# Targets are found with `go test -list '^Fuzz'`, so new ones are picked up by
# themselves (e.g. webhooks: FuzzVerify, signature verification accepts
# exactly what signing produces; FuzzAddressCheck and FuzzCheckURL, anything
# the webhook URL and address checks accept is public unicast). Each
# target's committed seed corpus (testdata/fuzz/FuzzXxx/) also
# runs in every plain `go test`; this script is the short fuzzing run CI adds.
#
#   scripts/fuzz.sh                            every target, 100000 executions each (database targets 2000)
#   FUZZTIME=1000000x scripts/fuzz.sh ./codefile   longer, one package
#
# Some targets use PostgreSQL (pgtest): DATABASE_URL is used when set, else
# scripts/pgup.sh finds or starts one, as `make test` does. `go test` writes a
# failing input to the package's testdata/fuzz/FuzzXxx/ (the corpus): commit it
# with the fix, so the bug stays fixed. No -race: it is too slow for this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Budgets are counts of executions, not durations: with a duration, Go 1.26's
# fuzz coordinator can fail a target with a bare "context deadline exceeded"
# as the time runs out (golang/go#75804, fixed in Go 1.27), which no count
# can. FUZZTIME sets every target's budget (a count like 50000x, or a
# duration if you accept that flake); by default each target gets 100000
# executions, and a target that runs on the database fewer (FUZZ_DB_BUDGET).
FUZZTIME=${FUZZTIME:-}
FUZZ_DB_BUDGET=${FUZZ_DB_BUDGET:-2000x}
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

# Targets whose property is checked against PostgreSQL (pgtest) run far
# slower per execution.
db_targets=$(grep -rlE 'pgtest\.(NewPool|NewDatabase)' --include='*_fuzz_test.go' . | xargs -r grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' | sed 's/^func //' || true)

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
    budget=${FUZZTIME:-100000x}
    if [ -z "$FUZZTIME" ] && grep -q "^$name\$" <<<"$db_targets"; then
      budget=$FUZZ_DB_BUDGET
    fi
    if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" >"$log" 2>&1; then
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
