#!/usr/bin/env bash
# Mutation check: apply each testdata/mutants/*.patch (a small deliberate bug),
# run the tests named on its "# caught-by:" line, and report whether they
# failed (caught) or passed (the mutant survived). A patch that does not apply,
# or code (tests included) that no longer compiles with it, is BROKEN, never
# caught: the patch must be rewritten. Patches are applied and reverted with git apply (no *.orig
# files), also on Ctrl-C. Usage: make mutants [MUTANTS=name,name].
#
# Every patch must apply and pass `go vet ./...` (every package, its tests
# included) with it applied (in batches, below). With --ci (make
# mutants-ci, run by .ci/run) only those whose header says "# ci: run" then
# run their catching tests; the others ("# ci: apply-only") are only
# compiled.
#
# Either way each patch needs a "# caught-by:" line, a "# ci:" line, and a
# row of its own in CONTRIBUTING.md's mutants table whose last column repeats its
# CI mode; the table has no row without a patch. A patch that lacks any of
# these is BROKEN: a new mutant comes with its documentation.
#
# The tests run with TMPDIR and GOTMPDIR set to a directory of this run's own.
# After each mutant, the processes left over from it — those started since
# this run began whose executable or working directory lies in that directory
# (test binaries, their helpers, escaped grandchildren a broken sweep leaves)
# — are killed by pid; nothing else on the machine is touched.
set -uo pipefail
cd "$(dirname "$0")/../.."
only=${MUTANTS:-}
ci=false
case "${1:-}" in
--ci) ci=true ;;
"") ;;
*)
	echo "usage: $0 [--ci]" >&2
	exit 2
	;;
esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mutants.XXXXXX") || exit 1
logs=$tmp/logs
mkdir -p "$logs" "$tmp/t"

# applied lists the patches applied to the checkout, last first.
applied=()
apply() { git apply "$1" && applied=("$1" "${applied[@]}"); }
restore() {
	local p
	for p in "${applied[@]}"; do
		git apply -R "$p" || echo "run.sh: could not revert $p; the checkout is dirty" >&2
	done
	applied=()
}

# startTime sets st to the start time of process $1 (clock ticks after
# boot, field 22 of /proc/PID/stat), or to nothing when it has exited. It
# forks nothing: it runs for every process on the machine after each
# mutant.
startTime() {
	local stat
	st=""
	{ read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 0
	set -- ${stat##*) } # from field 3 (state) on: the command name may hold spaces
	st=${20}
}
startTime $$
started=$st

# killLeftovers kills, by pid, the processes started after this run whose
# executable or working directory lies in this run's temporary directory.
# Older processes are not looked at beyond their stat line, which ps reads
# too: nothing of other sessions is touched.
killLeftovers() {
	local d pid st where n=0
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		[ "$pid" = $$ ] && continue
		startTime "$pid"
		[ -n "$st" ] && [ "$st" -ge "$started" ] || continue
		where="$(readlink "$d/exe" 2>/dev/null) $(readlink "$d/cwd" 2>/dev/null)"
		case "$where" in
		*"$tmp/t"*) kill -9 "$pid" 2>/dev/null && n=$((n + 1)) ;;
		esac
	done
	[ "$n" -gt 0 ] && echo "    (killed $n leftover processes)"
	return 0
}

finish() { restore; killLeftovers >/dev/null; rm -rf "$tmp/t"; }
trap 'finish; exit 130' INT TERM
trap finish EXIT

# A run killed with SIGKILL (no trap runs) leaves its mutant applied.
for p in testdata/mutants/*.patch; do
	if git apply -R --check "$p" 2>/dev/null; then
		echo "run.sh: $p is applied to the checkout (an earlier run was killed?); revert it: git apply -R $p" >&2
		exit 1
	fi
done

# mutantRows prints "name mode" for each row of CONTRIBUTING.md's mutants table:
# the table whose header begins "| mutant |", rows
# "| `name` | promise | caught by | mode |".
mutantRows() {
	awk -F'|' '
		/^\| mutant \|/ { in_table = 1; next }
		in_table && !/^\|/ { exit }
		in_table && $2 ~ /`/ {
			name = $2; gsub(/^ +`|` +$/, "", name)
			mode = $(NF - 1); gsub(/^ +| +$/, "", mode)
			print name, mode
		}
	' CONTRIBUTING.md
}
rows=$(mutantRows)

caught=0 survived=0 broken=0 compiled=0
# Rows of CONTRIBUTING.md's table without a patch: the table says what runs.
for row in $(echo "$rows" | cut -d' ' -f1); do
	if [ ! -f "testdata/mutants/$row.patch" ]; then
		printf '%-36s BROKEN   (a row in CONTRIBUTING.md'"'"'s mutants table, but no testdata/mutants/%s.patch)\n' "$row" "$row"
		broken=$((broken + 1))
	fi
done

# Each patch: its header, its CONTRIBUTING.md row, and that it applies.
patches=()
for p in testdata/mutants/*.patch; do
	name=$(basename "$p" .patch)
	if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
	mode=$(sed -n 's/^# ci: //p' "$p")
	log=$logs/$name.log
	if [ -z "$(sed -n 's/^# caught-by: //p' "$p")" ]; then
		printf '%-36s BROKEN   (no "# caught-by:" line)\n' "$name"
	elif [ "$mode" != run ] && [ "$mode" != apply-only ]; then
		printf '%-36s BROKEN   (no "# ci: run" or "# ci: apply-only" line)\n' "$name"
	elif ! grep -qxF "$name $mode" <<<"$rows"; then
		printf '%-36s BROKEN   (CONTRIBUTING.md'"'"'s mutants table needs a row "| `%s` | promise | caught by | %s |")\n' "$name" "$name" "$mode"
	elif ! git apply --check "$p" >"$log" 2>&1; then
		printf '%-36s BROKEN   (does not apply any more; see %s)\n' "$name" "$log"
	else
		patches+=("$p")
		continue
	fi
	broken=$((broken + 1))
done

# vetAlone applies patch $1 alone and runs go vet ./... (every package,
# its tests included); it reports whether that compiled, leaving the patch
# applied when it did.
vetAlone() {
	local name
	name=$(basename "$1" .patch)
	apply "$1" || return 1
	if ! go vet ./... >"$logs/$name.log" 2>&1; then
		restore
		printf '%-36s BROKEN   (does not compile; see %s)\n' "$name" "$logs/$name.log"
		broken=$((broken + 1))
		return 1
	fi
}

# The patches compile in batches: as many as apply on top of each other,
# vetted at once (one go vet ./... costs about as much for twenty patches
# as for one: what a patch changes is rebuilt with all that depends on it).
# A batch that does not compile is vetted patch by patch, to name the
# broken one. The tests run below, each patch alone.
vetted=()
rest=("${patches[@]}")
while [ "${#rest[@]}" -gt 0 ]; do
	start=$(date +%s)
	batch=() next=()
	for p in "${rest[@]}"; do
		if git apply --check "$p" 2>/dev/null && apply "$p"; then
			batch+=("$p")
		else
			next+=("$p")
		fi
	done
	if go vet ./... >"$logs/batch.log" 2>&1; then
		restore
		vetted+=("${batch[@]}")
	else
		restore
		for p in "${batch[@]}"; do
			vetAlone "$p" && restore && vetted+=("$p")
		done
	fi
	echo "    (${#batch[@]} patches compiled together in $(($(date +%s) - start))s)"
	rest=("${next[@]}")
done
$ci && for p in "${patches[@]}"; do
	if [[ " ${vetted[*]} " == *" $p "* ]] && [ "$(sed -n 's/^# ci: //p' "$p")" = apply-only ]; then
		printf '%-36s compiles (ci: apply-only)\n' "$(basename "$p" .patch)"
		compiled=$((compiled + 1))
	fi
done

declare -A compiles
for p in "${vetted[@]}"; do compiles[$p]=1; done
for p in "${patches[@]}"; do # in name order
	[ -n "${compiles[$p]:-}" ] || continue
	name=$(basename "$p" .patch)
	what=$(sed -n 's/^# what: //p' "$p")
	cmd=$(sed -n 's/^# caught-by: //p' "$p")
	mode=$(sed -n 's/^# ci: //p' "$p")
	log=$logs/$name.log
	if $ci && [ "$mode" = apply-only ]; then continue; fi
	apply "$p"
	start=$(date +%s)
	TMPDIR=$tmp/t GOTMPDIR=$tmp/t bash -c "$cmd" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	restore
	if grep -qE '\[(build|setup) failed\]' "$log"; then
		printf '%-36s BROKEN   (tests do not build; see %s)\n' "$name" "$log"
		broken=$((broken + 1))
	elif [ "$rc" -eq 0 ]; then
		printf '%-36s SURVIVED %3ss  %s\n' "$name" "$took" "$what"
		survived=$((survived + 1))
	else
		printf '%-36s caught   %3ss  %s\n' "$name" "$took" "$what"
		grep -E '^\s*--- FAIL' "$log" | head -5 | sed 's/^\s*/      /'
		caught=$((caught + 1))
	fi
	killLeftovers
done
if $ci; then
	echo "mutants: $caught caught, $compiled compiled (apply-only), $survived survived, $broken broken (logs in $logs)"
else
	echo "mutants: $caught caught, $survived survived, $broken broken (logs in $logs)"
fi
[ "$survived" -eq 0 ] && [ "$broken" -eq 0 ]
