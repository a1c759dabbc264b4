#!/usr/bin/env bash
# Change review of a fabric repository, for CI: the labs of the base branch and of the change
# are built, the change's lab validated statically, and each scenario played on both
# (`twin diff`, on the simulator unless TWIN_BACKEND says otherwise).
#
#   twin-review.sh install                      install fabric twin (README.md, "Install")
#   twin-review.sh BASE_CHECKOUT HEAD_CHECKOUT OUT
#
# install: fabric twin from its repository at a pinned ref, TWIN_REPO (URL) and TWIN_REF (a
# commit or tag), after the Debian/Ubuntu packages its build needs where they are missing
# (libyang2-dev: the libyang binding builds from source; gcc, git, Python's headers).
#
# A checkout holds fabric.yaml (the intent), optionally changes/*.yaml (config edits applied
# in name order with `twin apply`) and scenarios/*.yaml (the head's are played).
# OUT receives labs/, validate/, review-NAME/, junit/*.xml (static checks, and one case per
# regression of each review) and summary.md (the pull request comment); on bad input
# summary.md and junit/review.xml say what was refused.
# Exit code: 0 no failure and no regression, 1 a static check failed or a regression,
# 2 bad input, 3 internal error (the highest of the steps').
set -u

install() {
  : "${TWIN_REPO:?set TWIN_REPO to fabric twin repository URL (examples/ci/README.md)}"
  : "${TWIN_REF:?set TWIN_REF to a commit or tag of TWIN_REPO (examples/ci/README.md)}"
  local missing=() sudo=""
  [ -e /usr/include/libyang/libyang.h ] || missing+=(libyang2-dev)
  command -v gcc > /dev/null || missing+=(gcc)
  command -v git > /dev/null || missing+=(git)
  python3 -c 'import os, sysconfig; os.stat(sysconfig.get_paths()["include"] + "/Python.h")' \
    2> /dev/null || missing+=(python3-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || sudo=sudo
    echo "twin-review: installing ${missing[*]}"
    $sudo apt-get update -qq || return 2
    $sudo env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null || return 2
  fi
  python3 -m pip install "git+${TWIN_REPO}@${TWIN_REF}"
}
if [ "${1:-}" = install ]; then
  install
  exit
fi

base=$1 head=$2 out=$3
backend=${TWIN_BACKEND:-sim}
worst=0
note() { if [ "$1" -gt "$worst" ]; then worst=$1; fi; }
mkdir -p "$out/labs" "$out/junit"

# lab CHECKOUT NAME: generate the checkout's fabric, apply its changes; prints the lab path.
# What twin says goes to OUT/NAME.log, then to stderr.
lab() {
  local dir="$out/labs/$2-0" n=0 change code=0
  : > "$out/$2.log"
  twin generate "$1/fabric.yaml" -o "$dir" >> "$out/$2.log" 2>&1 || code=$?
  for change in "$1"/changes/*.yaml; do
    [ -e "$change" ] && [ $code = 0 ] || continue
    n=$((n + 1))
    twin apply "$dir" "$change" -o "$out/labs/$2-$n" >> "$out/$2.log" 2>&1 || code=$?
    dir="$out/labs/$2-$n"
  done
  cat "$out/$2.log" >&2
  [ $code = 0 ] && echo "$dir"
  return $code
}

# failed JUNIT NAME LOG CODE: what went wrong (LOG's last line) as a failing JUnit test case
# NAME in JUNIT; prints that line
failed() {
  local why
  why=$(grep -v '^[[:space:]]*$' "$3" 2> /dev/null | tail -n 1)
  why=${why:-exit $4}
  python3 - "$1" "$2" "$why" << 'EOF'
import sys
import xml.etree.ElementTree as ET

path, name, why = sys.argv[1:]
suites = ET.Element("testsuites")
suite = ET.SubElement(suites, "testsuite", name="fabric change review", tests="1", failures="1")
case = ET.SubElement(suite, "testcase", classname="twin.review", name=name)
ET.SubElement(case, "failure", message=why).text = why
ET.ElementTree(suites).write(path, encoding="unicode", xml_declaration=True)
EOF
  echo "$why"
}

# refused WHAT NAME CODE: the lab of one side was refused: summary.md and junit/review.xml
# say why; exit CODE
refused() {
  local why
  why=$(failed "$out/junit/review.xml" "$1" "$out/$2.log" "$3")
  echo "twin-review: $1 failed: $why" >&2
  printf '# Fabric change review\n\n**Not reviewed**: %s failed (exit %s):\n\n```\n%s\n```\n' \
    "$1" "$3" "$why" > "$out/summary.md"
  exit "$3"
}

base_lab=$(lab "$base" base) || refused "the base branch's lab" base $?
head_lab=$(lab "$head" head) || refused "the change's lab" head $?

{
  echo "# Fabric change review"
  echo
  echo "## Static validation of the change"
  echo
} > "$out/summary.md"
twin validate "$head_lab" --out "$out/validate" > "$out/validate.txt" 2> "$out/validate.log"
code=$?
note $code
cat "$out/validate.log" >&2
if [ $code -ge 2 ]; then
  why=$(failed "$out/junit/validate.xml" "static validation" "$out/validate.log" $code)
  echo "static validation failed (exit $code): $why" >> "$out/summary.md"
else
  cp "$out/validate/junit.xml" "$out/junit/validate.xml"
  cat "$out/validate.txt" >> "$out/summary.md"
fi

for scenario in "$head"/scenarios/*.yaml; do
  [ -e "$scenario" ] || continue
  name=$(basename "$scenario" .yaml)
  twin diff "$base_lab" "$head_lab" "$scenario" --backend "$backend" \
    --out "$out/review-$name" --junit "$out/junit/review-$name.xml" \
    --markdown "$out/review-$name.md" > /dev/null 2> "$out/review-$name.log"
  code=$?
  note $code
  cat "$out/review-$name.log" >&2
  echo >> "$out/summary.md"
  if [ $code -ge 2 ]; then
    why=$(failed "$out/junit/review-$name.xml" "review of $name" "$out/review-$name.log" $code)
    echo "**review of $name failed** (exit $code): $why" >> "$out/summary.md"
  else
    cat "$out/review-$name.md" >> "$out/summary.md"
  fi
done
exit $worst
