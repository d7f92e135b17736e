#!/usr/bin/env bash
# bench/lib/wait.sh: a wait that is met returns; one that runs out ends the
# script with exit 1 naming what did not come, within its bound.
#   tests/bench/wait_test.sh SOURCE_DIR
set -uo pipefail
src=$1
fail() { echo "FAILED: $*"; exit 1; }

out=$(bash -c "source '$src/bench/lib/wait.sh'; wait_for 5 'the marker' true; echo after" 2>&1)
[ "$out" = after ] || fail "a met wait did not return: $out"

out=$(bash -c "source '$src/bench/lib/wait.sh'; wait_for 1 'the marker' false; echo after" 2>&1)
code=$?
[ $code = 1 ] || fail "a wait that ran out exited $code, not 1: $out"
[[ $out == *"the marker did not come within 1s"* ]] || fail "the message does not name what did not come: $out"
[[ $out != *after* ]] || fail "the script went on after the wait ran out"

f=$(mktemp)
printf 'a\nb\na\n' > "$f"
(source "$src/bench/lib/wait.sh"; count_above "$f" a 1) || fail "2 matching lines are not above 1"
(source "$src/bench/lib/wait.sh"; count_above "$f" a 2) && fail "2 matching lines are above 2"
(source "$src/bench/lib/wait.sh"; count_above /nonexistent a 0) && fail "a missing file has lines"
rm -f "$f"
echo "wait_test: passed"
