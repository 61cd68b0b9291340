#!/usr/bin/env bash
# Mutation check: apply each testdata/mutants/*.patch (a small deliberate bug),
# run the tests named on its "# caught-by:" line, and report whether they
# failed (caught) or passed (the mutant survived). Every patch is reverted
# afterwards, also on Ctrl-C. Usage: make mutants [MUTANTS=name,name].
set -uo pipefail
cd "$(dirname "$0")/../.."
only=${MUTANTS:-}
applied=""
restore() { [ -n "$applied" ] && patch -s -p1 -R <"$applied"; applied=""; }
trap 'restore; exit 130' INT TERM
trap restore EXIT
caught=0 survived=0 broken=0
for p in testdata/mutants/*.patch; do
	name=$(basename "$p" .patch)
	if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
	what=$(sed -n 's/^# what: //p' "$p")
	cmd=$(sed -n 's/^# caught-by: //p' "$p")
	if ! patch -s -p1 --dry-run <"$p" >/dev/null; then
		printf '%-36s BROKEN   (does not apply any more)\n' "$name"
		broken=$((broken + 1))
		continue
	fi
	patch -s -p1 <"$p" && applied=$p
	start=$(date +%s)
	if bash -c "$cmd" >"/tmp/mutant-$name.log" 2>&1; then
		printf '%-36s SURVIVED %3ss  %s\n' "$name" $(($(date +%s) - start)) "$what"
		survived=$((survived + 1))
	else
		printf '%-36s caught   %3ss  %s\n' "$name" $(($(date +%s) - start)) "$what"
		caught=$((caught + 1))
	fi
	restore
	# A mutant that breaks the sweep leaves escaped grandchildren of the
	# test helper behind: kill them, so they do not pile up.
	pkill -9 -f '^lrchild -sleeper' 2>/dev/null || true
done
echo "mutants: $caught caught, $survived survived, $broken broken (logs in /tmp/mutant-NAME.log)"
[ "$survived" -eq 0 ] && [ "$broken" -eq 0 ]
