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
# The catching tests run MUTANTS_JOBS mutants at a time (2 unless set), the
# checkout untouched: each mutant's changed files are written apart and
# handed to every go command of its tests through GOFLAGS=-overlay (tests
# that build leaderrun or a helper inherit it), so that two mutants never
# share a file. Each runs with TMPDIR and GOTMPDIR set to a directory of
# its own; after it, the processes left over from it — those started since
# this run began whose executable or working directory lies in that
# directory (test binaries, their helpers, escaped grandchildren a broken
# sweep leaves) — are killed by pid; nothing else on the machine is
# touched.
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
# executable or working directory lies in directory $1 (this run's
# temporary directory when none is given). Older processes are not looked
# at beyond their stat line, which ps reads too: nothing of other sessions
# is touched.
killLeftovers() {
	local dir=${1:-$tmp/t} d pid st exe cwd n=0
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		[ "$pid" = $$ ] && continue
		startTime "$pid"
		[ -n "$st" ] && [ "$st" -ge "$started" ] || continue
		exe=$(readlink "$d/exe" 2>/dev/null)
		cwd=$(readlink "$d/cwd" 2>/dev/null)
		case "$exe/ $cwd/" in
		"$dir"/* | *" $dir"/*) kill -9 "$pid" 2>/dev/null && n=$((n + 1)) ;;
		esac
	done
	[ "$n" -gt 0 ] && echo "    (killed $n leftover processes)"
	return 0
}

# The mutants whose tests run, by the pid of the job running them (a
# process group of its own: set -m).
declare -A running=()
finish() {
	local pid
	for pid in "${!running[@]}"; do kill -9 -- "-$pid" 2>/dev/null; done
	restore
	killLeftovers >/dev/null
	rm -rf "$tmp/t" "$tmp/o"
}
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

# overlay writes the files patch $1 changes, as it changes them, under
# $tmp/o/NAME, and an overlay file mapping each file of the checkout to
# its changed copy (go help build, -overlay) at $tmp/o/NAME.json. The
# checkout stays as it is.
overlay() {
	local name dir files f sep=""
	name=$(basename "$1" .patch)
	dir=$tmp/o/$name
	files=$(sed -n 's|^+++ b/||p' "$1")
	for f in $files; do
		mkdir -p "$dir/$(dirname "$f")" && cp "$f" "$dir/$f" || return 1
	done
	# Outside any repository (GIT_CEILING_DIRECTORIES), git apply patches
	# the files of the directory it runs in.
	(cd "$dir" && GIT_CEILING_DIRECTORIES=$tmp/o git apply "$OLDPWD/$1") || return 1
	{
		printf '{"Replace": {'
		for f in $files; do
			printf '%s"%s": "%s"' "$sep" "$PWD/$f" "$dir/$f"
			sep=", "
		done
		printf '}}\n'
	} >"$dir.json"
}

# runMutant runs the catching tests of mutant $1 (command $2) against its
# overlay, in a temporary directory of its own, and writes their exit
# status and how long they took, in seconds, to $tmp/r/$1.
runMutant() {
	local start=$SECONDS rc
	mkdir -p "$tmp/t/$1"
	TMPDIR=$tmp/t/$1 GOTMPDIR=$tmp/t/$1 GOFLAGS="${GOFLAGS:+$GOFLAGS }-overlay=$tmp/o/$1.json" \
		bash -c "$2" >"$logs/$1.log" 2>&1
	rc=$?
	echo "$rc $((SECONDS - start))" >"$tmp/r/$1"
}

# reap waits for one running mutant's tests to end, reports whether they
# caught it, and kills what they left behind.
reap() {
	local pid name rc took what log
	wait -n -p pid
	name=${running[$pid]}
	unset "running[$pid]"
	log=$logs/$name.log
	what=$(sed -n 's/^# what: //p' "testdata/mutants/$name.patch")
	if ! read -r rc took <"$tmp/r/$name" 2>/dev/null; then
		printf '%-36s BROKEN   (its tests ended without a result; see %s)\n' "$name" "$log"
		broken=$((broken + 1))
	elif grep -qE '\[(build|setup) failed\]' "$log"; then
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
	killLeftovers "$tmp/t/$name"
}

jobs=${MUTANTS_JOBS:-2}
mkdir -p "$tmp/o" "$tmp/r"
declare -A compiles
for p in "${vetted[@]}"; do compiles[$p]=1; done
set -m # each job a process group of its own, for finish to kill
for p in "${patches[@]}"; do # started in name order
	[ -n "${compiles[$p]:-}" ] || continue
	name=$(basename "$p" .patch)
	if $ci && [ "$(sed -n 's/^# ci: //p' "$p")" = apply-only ]; then continue; fi
	if ! overlay "$p" >"$logs/$name.log" 2>&1; then
		printf '%-36s BROKEN   (its overlay could not be written; see %s)\n' "$name" "$logs/$name.log"
		broken=$((broken + 1))
		continue
	fi
	while [ "${#running[@]}" -ge "$jobs" ]; do reap; done
	runMutant "$name" "$(sed -n 's/^# caught-by: //p' "$p")" &
	running[$!]=$name
done
while [ "${#running[@]}" -gt 0 ]; do reap; done
set +m
if $ci; then
	echo "mutants: $caught caught, $compiled compiled (apply-only), $survived survived, $broken broken (logs in $logs)"
else
	echo "mutants: $caught caught, $survived survived, $broken broken (logs in $logs)"
fi
[ "$survived" -eq 0 ] && [ "$broken" -eq 0 ]
