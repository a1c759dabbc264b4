#!/usr/bin/env bash
# Change review of a fabric repository, for CI: the labs of the base branch and of the change
# are built, the change's lab validated statically, and each scenario played on both
# (`twin diff`, on the simulator unless TWIN_BACKEND says otherwise).
#
#   twin-review.sh BASE_CHECKOUT HEAD_CHECKOUT OUT
#
# A checkout holds fabric.yaml (the intent), optionally changes/*.yaml (config edits applied
# in name order with `twin apply`) and scenarios/*.yaml (the head's are played).
# OUT receives labs/, validate/, review-NAME/, junit/*.xml (static checks, and one case per
# regression of each review) and summary.md (the pull request comment).
# Exit code: 0 no failure and no regression, 1 a static check failed or a regression,
# 2 bad input, 3 internal error (the highest of the steps').
set -u
base=$1 head=$2 out=$3
backend=${TWIN_BACKEND:-sim}
worst=0
note() { if [ "$1" -gt "$worst" ]; then worst=$1; fi; }
mkdir -p "$out/labs" "$out/junit"

# lab CHECKOUT NAME: generate the checkout's fabric, apply its changes; prints the lab path
lab() {
  local dir="$out/labs/$2-0" n=0 change
  twin generate "$1/fabric.yaml" -o "$dir" >&2 || return 2
  for change in "$1"/changes/*.yaml; do
    [ -e "$change" ] || continue
    n=$((n + 1))
    twin apply "$dir" "$change" -o "$out/labs/$2-$n" >&2 || return 2
    dir="$out/labs/$2-$n"
  done
  echo "$dir"
}

base_lab=$(lab "$base" base) || { echo "twin-review: the base branch's lab failed" >&2; exit 2; }
head_lab=$(lab "$head" head) || { echo "twin-review: the change's lab failed" >&2; exit 2; }

{
  echo "# Fabric change review"
  echo
  echo "## Static validation of the change"
  echo
} > "$out/summary.md"
twin validate "$head_lab" --out "$out/validate" > "$out/validate.txt"
code=$?
note $code
cp "$out/validate/junit.xml" "$out/junit/validate.xml" 2>/dev/null
cat "$out/validate.txt" >> "$out/summary.md"

for scenario in "$head"/scenarios/*.yaml; do
  [ -e "$scenario" ] || continue
  name=$(basename "$scenario" .yaml)
  twin diff "$base_lab" "$head_lab" "$scenario" --backend "$backend" \
    --out "$out/review-$name" --junit "$out/junit/review-$name.xml" \
    --markdown "$out/review-$name.md" > /dev/null
  code=$?
  note $code
  { echo; cat "$out/review-$name.md" 2>/dev/null || echo "review of $name: exit $code"; } \
    >> "$out/summary.md"
done
exit $worst
