#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2016,SC2086,SC2317
# (SC2086: id lists split into words on purpose; SC2317: helpers run through poll_until and traps)
# The chaos test (issue 11): rounds of one random operation (snapshot,
# suspend, resume, fork, delete, terminate, and `warm N`: a warm pool
# filled or drained, issue 25), started with `async` on a few
# small sandboxes, the daemon killed with SIGKILL 0-2 s later, restarted on
# the same state, and then the invariants:
#   settled   nothing stays in a transitional state after the restart;
#   kept      a sandbox running or suspended before the round, that the
#             round did not terminate, is running or suspended after it;
#   exec      every sandbox the registry calls running answers an exec,
#   state     and shows the token written last and the same process
#             (its counter's token): it was not restarted from scratch;
#   record    and its info.json has its image's digest (its snapshots
#             carry it, and a fork compares it with the image's);
#   runsc     `runsc list` holds exactly the running sandboxes' containers,
#             each running (not paused, not stopped), and the warm pools'
#             members (a restart deletes them and the pools refill:
#             docs/control-files.md, "Warm pools"), nothing else;
#   fork      every completed snapshot forks, and the fork shows the token
#             written before the snapshot, in the snapshot's process;
#   resume    every suspended sandbox resumes with its state (so a
#             resume round first suspends a sandbox, not killed);
#   store     after the start-up collection pass the store holds no pack no
#             manifest names, no temp object, no condemned pack; and every
#             pack a manifest names is there.
# At the end: rounds, kills per operation and phase (the phase is read from
# the registry the killed daemon left, plus the runsc commands still
# running), and passes/failures per invariant. A failure names the round,
# the operation, the phase the kill hit and what was found; the same
# failure of the same object in a later round is counted in one line.
#
# CHAOS_ROUNDS (default 30) rounds, or fewer when CHAOS_SECONDS (default
# 600) run out; CHAOS_SEED (default: random) replays the sequence of
# operations, targets and kill delays (the targets also depend on what the
# earlier rounds left, so a replay is close, not exact); CHAOS_ONLY=OP makes
# every round that operation where it can be made. `make chaos` runs a
# longer profile. Nothing here waits for a fixed time to pass a check: the
# kill delay is the one random sleep, and it decides what is tested, not
# whether it passes.
OP_TIMEOUT=${OP_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"

CHAOS_ROUNDS=${CHAOS_ROUNDS:-30}
CHAOS_SECONDS=${CHAOS_SECONDS:-600}
CHAOS_SEED=${CHAOS_SEED:-$(($(od -An -N2 -tu2 /dev/urandom) + 0))}
CHAOS_VERBOSE=${CHAOS_VERBOSE:-0}
CHAOS_ONLY=${CHAOS_ONLY:-} # one operation each round, where it can be made (else a snapshot)
POOL_MIN=2 # sandboxes kept running or suspended
POOL_MAX=3
SNAPS_MAX=3 # completed snapshots before deletes are preferred (each is forked every round)
BALLAST_MB=16 # random bytes in each sandbox's /tmp: a checkpoint that takes a moment
RANDOM=$CHAOS_SEED

# The counter entrypoint, after BALLAST_MB of incompressible memory.
CHAOS_ENTRYPOINT="head -c ${BALLAST_MB}m /dev/urandom > /tmp/ballast; $COUNTER_ENTRYPOINT"

declare -A SB_TOK      # sandbox -> the token last written into its /root/tok and /tmp/tok
declare -A SB_CTR      # sandbox -> its counter's token (its process)
declare -A SNAP_TOK    # snapshot -> the token it must hold
declare -A SNAP_CTR    # snapshot -> the counter token of the process it holds
declare -A KILLS       # "op phase" -> kills
declare -A RUNSC_AT    # runsc subcommand still running at a kill -> kills
declare -A OUTCOME     # "op phase -> what the target became" -> rounds
declare -A INV_PASS INV_FAIL FIRST_FAIL
POOL=()         # the sandboxes the rounds operate on
EXPECT_ALIVE=() # pool sandboxes running or suspended when the last round's checks ended
LINGER_PIDS=()  # runsc commands a killed daemon left running: ended by pid on exit
CHECK_FORKS=()  # forks the checks made, terminated at the end of the round
SB_N=0
ROUND=0 OP="" PHASE="" TARGET=""

# R: a random number below $1, in the main shell (a subshell would not move $RANDOM on).
rnd() { R=$((RANDOM % $1)); }


# inv NAME DESC OK [DETAIL...]: one counted invariant check; a failure names
# the round, the operation interrupted, the phase the kill hit, and what was found.
inv() {
	local name=$1 desc=$2 okay=$3
	shift 3
	if [ "$okay" = 1 ]; then
		INV_PASS[$name]=$((${INV_PASS[$name]:-0} + 1))
		if [ "$CHAOS_VERBOSE" = 1 ]; then pass "$name: $desc"; else pass "$name: $desc" >/dev/null; fi
	else
		INV_FAIL[$name]=$((${INV_FAIL[$name]:-0} + 1))
		# The same finding on the same object again: counted, told in one line.
		if [ -n "${FIRST_FAIL["$name $desc"]:-}" ]; then
			fail "$name: $desc" "round $ROUND: again, as first in round ${FIRST_FAIL["$name $desc"]}"
			return
		fi
		FIRST_FAIL["$name $desc"]=$ROUND
		fail "$name: $desc" "round $ROUND (seed $CHAOS_SEED): $OP of $TARGET, killed in phase $PHASE" "$@"
	fi
}

sql() { sqlite3 -cmd ".timeout 5000" "$STATE/registry.db" "$1" 2>/dev/null; }
sb_list() { rd "$MNT/sandboxes/index"; }   # "<id> <status>" a line
snap_list() { rd "$MNT/snapshots/index"; } # "<id> <status> <sandbox> <name>" a line
sbs_in() { sb_list | awk -v s="$1" '$2 == s { print $1 }'; }
snaps_in() { snap_list | awk -v s="$1" '$2 == s { print $1 }'; }
in_pool() {
	local p
	for p in "${POOL[@]}"; do [ "$p" = "$1" ] && return 0; done
	return 1
}
pool_in() { # pool members whose status is $1
	local p
	for p in "${POOL[@]}"; do [ "$(sb_status "$p" 2>/dev/null)" = "$1" ] && echo "$p"; done
}
# pick WORDS...: one of the words (in the main shell: sets PICK).
pick() {
	[ $# -gt 0 ] || { PICK=""; return 1; }
	rnd $#
	local a=("$@")
	PICK=${a[$R]}
}

# --- sandboxes and tokens ------------------------------------------------------

# new_pool_sandbox: start one more sandbox of the pool and record its process.
new_pool_sandbox() {
	local id=c$SB_N c
	SB_N=$((SB_N + 1))
	make_sandbox "$id" "$CHAOS_ENTRYPOINT" && poll_until 60 counter "$id" || return 1
	c=$(counter "$id") || return 1
	SB_CTR[$id]=$(counter_token "$c")
	SB_TOK[$id]=""
	POOL+=("$id")
}

# put_token SB TOKEN: what its next snapshot must hold, in the root fs and in /tmp.
put_token() {
	sb_run "$1" "echo $2 > /root/tok && echo $2 > /tmp/tok" >/dev/null || return 1
	SB_TOK[$1]=$2
}

# state_of SB: "TOK TOK CTR" as the sandbox shows them (its files, its counter's token).
state_of() {
	local out
	out=$(sb_run "$1" 'cat /root/tok /tmp/tok 2>/dev/null | tr "\n" " "; cat /tmp/counter') || return 1
	printf '%s\n' "${out% *}"
}
want_state() { printf '%s %s %s' "${SB_TOK[$1]:-}" "${SB_TOK[$1]:-}" "${SB_CTR[$1]:-}" | sed 's/^ *//'; }

# learn_sandbox SB: a sandbox this test did not start (an interrupted fork's):
# it holds what its parent snapshot holds.
learn_sandbox() {
	local parent
	[ -n "${SB_CTR[$1]+x}" ] && return 0
	parent=$(readlink "$MNT/sandboxes/$1/parent" 2>/dev/null) || return 1
	parent=$(basename "$parent")
	[ -n "${SNAP_CTR[$parent]+x}" ] || return 1
	SB_TOK[$1]=${SNAP_TOK[$parent]}
	SB_CTR[$1]=${SNAP_CTR[$parent]}
}

# --- the daemon's killed state --------------------------------------------------

# runsc commands (not sandboxes or gofers) on this state's runsc root: "PID SUBCOMMAND" a line.
# Builtins only in the loop: a $(basename) per process made this scan of
# every /proc entry take seconds on a loaded machine, in every round.
runsc_children() {
	local f pid argv sub skip a
	for f in /proc/[0-9]*/cmdline; do
		pid=${f#/proc/}
		pid=${pid%/cmdline}
		{ mapfile -d '' -t argv <"$f"; } 2>/dev/null || continue
		{ [ "${#argv[@]}" -gt 1 ] && [ "${argv[0]##*/}" = runsc ]; } || continue
		[[ " ${argv[*]} " == *" --root $RUNSC_ROOT "* || " ${argv[*]} " == *" --root=$RUNSC_ROOT "* ]] ||
			continue
		sub="" skip=0
		for a in "${argv[@]:1}"; do
			if [ "$skip" = 1 ]; then skip=0; continue; fi
			case $a in --root | --log | --debug-log | --platform) skip=1 ;; -*) ;; *) sub=$a; break ;; esac
		done
		echo "$pid ${sub:-?}"
	done
}

# phase_at_kill: where the round's operation stood in the registry the killed
# daemon left (what the restart starts from). Sets PHASE.
phase_at_kill() {
	local sb_state sb_row snap_row new
	case $OP in
	snapshot | suspend)
		# in_progress from the checkpoint job's start; a suspend's pid is 0 once its container is deleted.
		sb_row=$(sql "SELECT state || ' ' || pid FROM sandboxes WHERE id = '$TARGET'")
		new=$(new_snapshot_rows "$TARGET")
		snap_row=$(sql "SELECT state FROM snapshots WHERE id = '${new%% *}'")
		case $snap_row:$sb_row in
		:*) PHASE=before ;;
		pending:*) PHASE=queued ;;
		"in_progress:snapshotting "* | "in_progress:suspending "[1-9]*) PHASE=checkpoint ;;
		"in_progress:running "* | "in_progress:suspending 0") PHASE=store ;;
		*) PHASE="after($snap_row, ${sb_row% *})" ;;
		esac
		# Checkpointed, the stopped container being deleted: the job had not said so yet.
		[ "$PHASE" = checkpoint ] && [[ ,$RUNSC_LEFT, == *,delete,* ]] && PHASE=delete-container
		;;
	resume)
		sb_state=$(sql "SELECT state FROM sandboxes WHERE id = '$TARGET'")
		case $sb_state in suspended) PHASE=before ;; resuming) PHASE=restore ;; *) PHASE="after($sb_state)" ;; esac
		;;
	fork)
		new=$(sql "SELECT state FROM sandboxes WHERE parent_snapshot = '$TARGET' AND
			id NOT IN ($(sql_ids "${KNOWN_SBS[@]}"))" | head -n 1)
		case $new in "") PHASE=before ;; starting) PHASE=restore ;; *) PHASE="after($new)" ;; esac
		;;
	delete)
		snap_row=$(sql "SELECT state FROM snapshots WHERE id = '$TARGET'")
		if [ -z "$snap_row" ]; then
			PHASE="after(gone)"
		elif [ -e "$STATE/store/manifests/$TARGET.json" ]; then
			PHASE=before
		else
			PHASE=manifest-deleted
		fi
		;;
	terminate)
		sb_state=$(sql "SELECT state FROM sandboxes WHERE id = '$TARGET'")
		case $sb_state in terminating) PHASE=terminate ;; terminated) PHASE="after(terminated)" ;;
		*) PHASE=before ;; esac
		;;
	warm) PHASE="members($(sql "SELECT count(*) FROM sandboxes WHERE state = 'warm'"))" ;;
	esac
}
sql_ids() {
	local i out="''"
	for i in "$@"; do out+=",'$i'"; done
	printf '%s' "$out"
}
# new_snapshot_rows SB: ids of SB's snapshot rows this round added, newest first.
new_snapshot_rows() {
	sql "SELECT id FROM snapshots WHERE sandbox_id = '$1' AND id NOT IN ($(sql_ids "${KNOWN_SNAPS[@]}"))
		ORDER BY created_at DESC" | tr '\n' ' '
}

# --- one round -------------------------------------------------------------------

# choose_op: the round's operation and its target (OP, TARGET, TOKEN written first).
choose_op() {
	local running suspended completed deletable deps s
	running=$(pool_in running)
	suspended=$(pool_in suspended)
	completed=$(snaps_in completed)
	deps=""
	for s in $suspended; do deps+=" $(suspend_snapshot_of "$s")"; done
	deletable=$(for s in $completed; do [[ " $deps " == *" $s "* ]] || echo "$s"; done)
	rnd 11
	case $R in
	0 | 1) OP=snapshot ;;
	2 | 3) OP=suspend ;;
	4 | 5) OP=resume ;;
	6) OP=fork ;;
	7) OP=delete ;;
	8) OP=terminate ;;
	9) OP=fork ;;
	10) OP=warm ;;
	esac
	[ -n "$CHAOS_ONLY" ] && OP=$CHAOS_ONLY
	if [ "$(wc -w <<<"$deletable")" -ge "$SNAPS_MAX" ]; then
		rnd 3
		[ "$R" -lt 2 ] && OP=delete
	fi
	# Most suspends are killed before they end: suspend one first, not killed.
	if [ "$OP" = resume ] && [ -z "$suspended" ]; then
		pick $running
		if [ -n "$PICK" ] && put_token "$PICK" "r${ROUND}t$RANDOM" && wr "$MNT/sandboxes/$PICK/suspend"; then
			suspended=$PICK
			record_new_snapshots "$PICK"
		else
			note "round $ROUND: no sandbox to resume, and a suspend of ${PICK:-none} failed: a suspend instead"
			OP=suspend
		fi
	fi
	[ "$OP" = fork ] || [ "$OP" = warm ] && [ -z "$completed" ] && OP=snapshot
	[ "$OP" = delete ] && [ -z "$deletable" ] && OP=snapshot
	[ "$OP" = terminate ] && [ "${#POOL[@]}" -le 1 ] && OP=snapshot
	case $OP in
	snapshot | suspend) pick $running ;;
	resume) pick $suspended ;;
	fork | warm) pick $completed ;;
	delete) pick $deletable ;;
	terminate) pick "${POOL[@]}" ;;
	esac
	TARGET=$PICK
}

# start_op: the operation, in the background, answered with async: its
# output and exit status land in $T/op.*.
start_op() {
	local file how=wr what=async
	case $OP in
	snapshot | suspend | resume | terminate) file=$MNT/sandboxes/$TARGET/$OP ;;
	fork | delete | warm) file=$MNT/snapshots/$TARGET/$OP ;;
	esac
	# A pool of 0 (drained), 1 or 2: filling runs restores the kill may cut.
	[ "$OP" = warm ] && rnd 3 && what=$R
	# snapshot and fork answer the new id on the same open file; the others answer nothing.
	[ "$OP" = snapshot ] || [ "$OP" = fork ] && how=wr_read
	rm -f "$T/op.out" "$T/op.rc"
	(
		"$how" "$file" "$what" >"$T/op.out" 2>&1
		echo $? >"$T/op.rc"
	) &
	OP_PID=$!
}

# kill_daemon: SIGKILL, reap it, note what it left running.
kill_daemon() {
	local pid sub
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=""
	RUNSC_LEFT="" ROUND_LINGER=()
	while read -r pid sub; do
		[ -n "$pid" ] || continue
		LINGER_PIDS+=("$pid")
		ROUND_LINGER+=("$pid")
		RUNSC_LEFT+="${RUNSC_LEFT:+,}$sub"
		RUNSC_AT[$sub]=$((${RUNSC_AT[$sub]:-0} + 1))
	done < <(runsc_children)
}

# settle: wait for every transitional sandbox and snapshot to settle.
settle() {
	local id st
	while read -r id st; do
		case $st in starting | snapshotting | suspending | resuming | terminating)
			st=$(sb_wait "$id" 2>&1)
			case $st in created | running | suspended | terminated | failed)
				inv settled "sandbox $id settles ($st)" 1 ;;
			*) inv settled "sandbox $id leaves its transitional state" 0 "wait: ${st:-nothing}" ;;
			esac
			;;
		esac
	done < <(sb_list)
	while read -r id st _; do
		case $st in pending | in_progress)
			st=$(snap_wait "$id" 2>&1)
			case $st in completed | failed) inv settled "snapshot $id settles ($st)" 1 ;;
			*) inv settled "snapshot $id settles" 0 "wait: ${st:-nothing}" ;;
			esac
			;;
		esac
	done < <(snap_list)
}

# record_new_snapshots SB: a snapshot of SB this round made holds the token written before it.
record_new_snapshots() {
	local id st sb
	while read -r id st sb _; do
		[ -n "${SNAP_TOK[$id]+x}" ] && continue
		if [ "$sb" = "$1" ] && [ -n "${SB_CTR[$sb]+x}" ]; then
			SNAP_TOK[$id]=${SB_TOK[$sb]}
			SNAP_CTR[$id]=${SB_CTR[$sb]}
		else
			note "round $ROUND: snapshot $id of $sb ($st) is not one this test took"
			SNAP_TOK[$id]="" SNAP_CTR[$id]=""
		fi
	done < <(snap_list)
}

# check_kept WHEN: every pool sandbox running or suspended when the last
# round's checks ended still is, unless this round terminated it.
check_kept() {
	local sb st
	for sb in "${EXPECT_ALIVE[@]}"; do
		[ "$OP" = terminate ] && [ "$sb" = "$TARGET" ] && continue
		st=$(sb_status "$sb" 2>&1)
		case $st in running | suspended) inv kept "sandbox $sb is $st $1" 1 ;;
		*) inv kept "sandbox $sb is still running or suspended $1" 0 \
			"it is ${st:-gone}: $(rd "$MNT/sandboxes/$sb/error" 2>&1)" ;;
		esac
	done
}

# exec_later SB: whether SB answers once the runsc commands the killed daemon left have ended.
exec_later() {
	local p deadline=$(($(date +%s) + 60))
	for p in "${ROUND_LINGER[@]}"; do
		while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
	done
	if sb_run "$1" true >/dev/null 2>&1; then
		echo "it answers once the runsc commands the killed daemon left ($RUNSC_LEFT) have ended"
	else
		local pid
		pid=$(jget "$MNT/sandboxes/$1/info.json" .pid 2>/dev/null)
		echo "nor once the runsc commands the killed daemon left (${RUNSC_LEFT:-none}) have ended:" \
			"status $(sb_status "$1" 2>&1), runsc: $(runsc_state_of "$(runtime_id "$1")")," \
			"its pid $pid: $(awk '/^State:/ { print $2, $3 }' "/proc/$pid/status" 2>/dev/null || echo gone)"
	fi
}

check_running() {
	local sb got want rid st want_ids="" listed table rc
	local -a checked=()
	for sb in $(sbs_in running); do
		learn_sandbox "$sb"
		if got=$(state_of "$sb"); then
			inv exec "running sandbox $sb answers an exec" 1
			if [ -n "${SB_CTR[$sb]+x}" ]; then
				want=$(want_state "$sb")
				[ "$got" = "$want" ]
				inv state "sandbox $sb shows its last token, same process" $((!$?)) \
					"expected: $want" "got:      $got"
			fi
		else
			inv exec "running sandbox $sb answers an exec" 0 "exec: $(sb_exec "$sb" true 2>&1 | tail -n 3)" \
				"$(exec_later "$sb")"
		fi
		got=$(jget "$MNT/sandboxes/$sb/info.json" .image_digest)
		[ "$got" = "$IMAGE_DIGEST" ]
		inv record "running sandbox $sb records its image's digest" $((!$?)) \
			"info.json: image_digest \"$got\", the image's: $IMAGE_DIGEST"
		rid=$(runtime_id "$sb")
		checked+=("$sb $rid")
		want_ids+="$rid"$'\n'
	done
	# One `runsc list` for the round's runsc checks (each call takes up to a
	# second on a loaded machine): each container's state, and the whole set.
	table=$(timeout 30 runsc --root "$RUNSC_ROOT" list 2>&1)
	rc=$?
	for sb in "${checked[@]}"; do
		rid=${sb#* } sb=${sb%% *}
		st=""
		[ "$rc" -eq 0 ] && st=$(awk -v id="$rid" 'NR > 1 && $1 == id { print $3 }' <<<"$table")
		[ "$st" = running ]
		inv runsc "runsc calls the container of running sandbox $sb running" $((!$?)) \
			"runsc state of $rid: ${st:-not listed}"
	done
	# The warm pools' members, read after the list: a pool only grows while no round runs, and a
	# member's row is written before its container is made, so every member listed has its row.
	local members
	members=$(sql "SELECT runtime_id FROM sandboxes WHERE state = 'warm'")
	want_ids=$(printf '%s' "$want_ids" | sed '/^$/d' | sort)
	if [ "$rc" -eq 0 ]; then
		listed=$(awk 'NR > 1 { print $1 }' <<<"$table" | grep -vxF -f <(printf '%s\n' $members "-") | sort)
	else
		listed=$table
	fi
	[ "$listed" = "$want_ids" ]
	inv runsc "runsc lists exactly the running sandboxes' and warm members' containers" $((!$?)) \
		"registry: $(tr '\n' ' ' <<<"$want_ids")" "runsc:    $(tr '\n' ' ' <<<"$listed")" \
		"sandboxes: $(sb_list | tr '\n' ';')"
	# A container no sandbox names would fail every later round too: remove it.
	for rid in $(comm -23 <(printf '%s\n' "$listed") <(printf '%s\n' "$want_ids")); do
		note "round $ROUND: removing container $rid, which no running sandbox names"
		timeout 30 runsc --root "$RUNSC_ROOT" kill "$rid" KILL >/dev/null 2>&1
		timeout 60 runsc --root "$RUNSC_ROOT" delete -force "$rid" >/dev/null 2>&1
	done
}

# store_findings: what the store holds that it should not, one a line.
store_findings() {
	local s=$STATE/store packs f rel p
	packs=$(cat "$s"/manifests/*.json 2>/dev/null | jq -r '.packs[]?' 2>/dev/null | sort -u)
	for f in "$s"/manifests/*.json; do
		[ -e "$f" ] || continue
		jq -e '.packs' "$f" >/dev/null 2>&1 || echo "unreadable manifest ${f#"$s"/}"
	done
	while IFS= read -r f; do
		rel=${f#"$s"/}
		case $rel in
		*.tmp.*) echo "temp object $rel" ;;
		trash/*) echo "condemned pack marker $rel" ;;
		packs/*.pack | packs/*.idx)
			p=${rel#packs/}
			p=${p%.*}
			grep -qxF "$p" <<<"$packs" || echo "pack no manifest names: $rel"
			;;
		esac
	done < <(find "$s" -type f 2>/dev/null)
}
store_missing() {
	local s=$STATE/store p
	for p in $(cat "$s"/manifests/*.json 2>/dev/null | jq -r '.packs[]?' 2>/dev/null | sort -u); do
		[ -f "$s/packs/$p.pack" ] || echo "packs/$p.pack"
	done
}
store_clean() { [ -z "$(store_findings)" ]; }
check_store() {
	local found
	# A delete the restart finishes collects right after: give it 10 s.
	poll_until 10 store_clean
	found=$(store_findings)
	[ -z "$found" ]
	inv store "the store holds nothing no manifest names" $((!$?)) "$found"
	found=$(store_missing)
	[ -z "$found" ]
	inv store "every pack a manifest names is in the store" $((!$?)) "missing: $found"
}

check_forks() {
	local s f got want
	for s in $(snaps_in completed); do
		f=$(fork_of "$s" 2>&1)
		if [[ ! $f =~ ^sbx- ]]; then
			inv fork "completed snapshot $s forks" 0 "fork: $f" "$(rd "$MNT/errors" | tail -n 1)"
			continue
		fi
		CHECK_FORKS+=("$f")
		inv fork "completed snapshot $s forks" 1
		[ -n "${SNAP_CTR[$s]:-}" ] || continue
		got=$(state_of "$f" 2>&1)
		want=$(printf '%s %s %s' "${SNAP_TOK[$s]}" "${SNAP_TOK[$s]}" "${SNAP_CTR[$s]}" | sed 's/^ *//')
		[ "$got" = "$want" ]
		inv fork "the fork of $s shows the token written before it, same process" $((!$?)) \
			"expected: $want" "got:      $got"
	done
	for f in "${CHECK_FORKS[@]}"; do wr "$MNT/sandboxes/$f/terminate" async >/dev/null 2>&1; done
}

# check_resumes: resume every suspended sandbox (a resume round suspends one first).
check_resumes() {
	local sb got want out
	for sb in $(sbs_in suspended); do
		if ! out=$(wr "$MNT/sandboxes/$sb/resume" 2>&1); then
			inv resume "suspended sandbox $sb resumes" 0 "resume: $out" \
				"error: $(rd "$MNT/sandboxes/$sb/error" 2>&1)"
			continue
		fi
		inv resume "suspended sandbox $sb resumes" 1
		learn_sandbox "$sb"
		[ -n "${SB_CTR[$sb]+x}" ] || continue
		got=$(state_of "$sb" 2>&1)
		want=$(want_state "$sb")
		[ "$got" = "$want" ]
		inv resume "resumed $sb shows its last token, same process" $((!$?)) \
			"expected: $want" "got:      $got"
	done
}

# tidy: end the check forks, forget sandboxes and snapshots that are done
# with, adopt or end the round's fork, keep POOL_MIN sandboxes.
tidy() {
	local f id st keep=() p
	for f in "${CHECK_FORKS[@]}"; do
		sb_wait "$f" >/dev/null 2>&1
		rmdir "$MNT/sandboxes/$f" 2>/dev/null
	done
	CHECK_FORKS=()
	while read -r id st; do
		in_pool "$id" && continue
		if [ "$st" = running ] && [ "${#POOL[@]}" -lt "$POOL_MAX" ]; then
			POOL+=("$id") # the round's fork, or one an interrupted fork left
		elif [ "$st" = running ] || [ "$st" = suspended ]; then
			wr "$MNT/sandboxes/$id/terminate" >/dev/null 2>&1
		fi
	done < <(sb_list)
	while read -r id st; do
		case $st in terminated | failed) rmdir "$MNT/sandboxes/$id" 2>/dev/null ;; esac
	done < <(sb_list)
	for p in "${POOL[@]}"; do [ -d "$MNT/sandboxes/$p" ] && keep+=("$p"); done
	POOL=("${keep[@]}")
	EXPECT_ALIVE=()
	for p in "${POOL[@]}"; do
		case $(sb_status "$p") in running | suspended) EXPECT_ALIVE+=("$p") ;; esac
	done
	for id in $(snaps_in failed); do wr "$MNT/snapshots/$id/delete" >/dev/null 2>&1; done
	while [ "${#POOL[@]}" -lt "$POOL_MIN" ]; do
		new_pool_sandbox || bail "round $ROUND: start a new sandbox for the pool"
		EXPECT_ALIVE+=("${POOL[-1]}")
	done
}

# outcome: what the round's target became (sets WHAT, counts it).
outcome() {
	local what
	case $OP in
	snapshot | suspend)
		local ids id
		ids=$(new_snapshot_rows "$TARGET")
		id=${ids%% *}
		what="snapshot ${id:+$(snap_status "$id" 2>/dev/null)}"
		[ -n "$id" ] || what="no snapshot"
		[ "$OP" = suspend ] && what+=", sandbox $(sb_status "$TARGET" 2>&1)"
		;;
	resume | terminate) what="sandbox $(sb_status "$TARGET" 2>&1)" ;;
	fork)
		local f id
		f=$(grep -o '^sbx-[0-9a-f]*' "$T/op.out" 2>/dev/null)
		[ -n "$f" ] || while read -r id _; do
			[[ " ${KNOWN_SBS[*]} " == *" $id "* ]] && continue
			[ "$(basename "$(readlink "$MNT/sandboxes/$id/parent" 2>/dev/null)")" = "$TARGET" ] && f=$id
		done < <(sb_list)
		what="fork ${f:+$(sb_status "$f")}"
		[ -n "$f" ] || what="no fork"
		;;
	delete) if [ -e "$MNT/snapshots/$TARGET" ]; then what="snapshot $(snap_status "$TARGET")"; else what=gone; fi ;;
	warm) what="pool $(rd "$MNT/snapshots/$TARGET/warm" 2>&1)" ;;
	esac
	OUTCOME["$OP $PHASE -> $what"]=$((${OUTCOME["$OP $PHASE -> $what"]:-0} + 1))
	WHAT=$what
}

round() {
	local delay failed0=$FAILED t0 out sb
	ROUND=$1
	PHASE="(not started)" OP="(choosing)" TARGET=""
	choose_op
	KNOWN_SBS=() KNOWN_SNAPS=()
	while read -r sb _; do KNOWN_SBS+=("$sb"); done < <(sb_list)
	while read -r sb _; do KNOWN_SNAPS+=("$sb"); done < <(snap_list)
	if [ "$OP" = snapshot ] || [ "$OP" = suspend ]; then
		put_token "$TARGET" "r${ROUND}t$RANDOM" || inv exec "sandbox $TARGET takes the round's token" 0
	fi
	# Half the kills in the first 300 ms, where most of an operation is.
	rnd 2
	if [ "$R" = 0 ]; then rnd 300; else rnd 2001; fi
	delay=$R
	echo "=== $(date +%T) round $ROUND: $OP $TARGET, kill after $delay ms" >>"$DAEMON_LOG"
	PHASE="(running)"
	t0=$(now_ms)
	start_op
	t0=$((t0 + delay - $(now_ms)))
	[ "$t0" -gt 0 ] && sleep "$(printf '%d.%03d' $((t0 / 1000)) $((t0 % 1000)))"
	kill_daemon
	phase_at_kill
	KILLS["$OP $PHASE"]=$((${KILLS["$OP $PHASE"]:-0} + 1))
	timeout 30 tail --pid="$OP_PID" -f /dev/null
	out="$(head -n 2 "$T/op.out" 2>/dev/null | tr '\n' ' ')rc=$(cat "$T/op.rc" 2>/dev/null)"
	unmount_mnt
	start_daemon || bail "round $ROUND: the daemon restarts on the same state after a kill in $OP $PHASE"
	record_new_snapshots "$TARGET"
	settle
	outcome
	check_kept "after the restart"
	check_running
	check_store
	check_forks
	check_resumes
	check_kept "once the checks are done"
	printf 'round %d: %s %s after %d ms, phase %s%s: %s; the op said: %s; %d failed\n' \
		"$ROUND" "$OP" "$TARGET" "$delay" "$PHASE" "${RUNSC_LEFT:+ (runsc $RUNSC_LEFT left running)}" \
		"$WHAT" "$out" $((FAILED - failed0))
	tidy
}

cleanup_chaos() {
	local p
	for p in "${LINGER_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
}
trap 'rc=$?; cleanup_chaos; (exit $rc); cleanup' EXIT

note "seed $CHAOS_SEED (CHAOS_SEED=$CHAOS_SEED replays it), $CHAOS_ROUNDS rounds within $CHAOS_SECONDS s"
start_daemon || bail "the daemon mounts"
for _ in $(seq 1 "$POOL_MIN"); do new_pool_sandbox || bail "start a sandbox of the pool"; done
EXPECT_ALIVE=("${POOL[@]}")
IMAGE_DIGEST=$(jget "$MNT/sandboxes/c0/info.json" .image_digest)
start=$(date +%s)
rounds=0
for r in $(seq 1 "$CHAOS_ROUNDS"); do
	if [ $(($(date +%s) - start)) -ge "$CHAOS_SECONDS" ]; then
		skip "rounds $r to $CHAOS_ROUNDS: CHAOS_SECONDS ($CHAOS_SECONDS s) ran out"
		break
	fi
	round "$r"
	rounds=$r
done
duration=$(($(date +%s) - start))

echo "--- chaos: seed $CHAOS_SEED, $rounds rounds in $duration s"
echo "kills per operation and phase (the registry the killed daemon left):"
for k in "${!KILLS[@]}"; do printf '  %-40s %d\n' "$k" "${KILLS[$k]}"; done | sort
echo "runsc commands still running at a kill:"
for k in "${!RUNSC_AT[@]}"; do printf '  %-40s %d\n' "$k" "${RUNSC_AT[$k]}"; done | sort
echo "what the target became:"
for k in "${!OUTCOME[@]}"; do printf '  %-60s %d\n' "$k" "${OUTCOME[$k]}"; done | sort
echo "invariant checks (passed failed):"
for k in settled kept exec state record runsc fork resume store; do
	printf '  %-8s %d %d\n' "$k" "${INV_PASS[$k]:-0}" "${INV_FAIL[$k]:-0}"
done
echo "---"
stop_daemon
finish
