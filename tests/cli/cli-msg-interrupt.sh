# RUN: bash %s
# An interrupted compile (SIGINT, SIGTERM) leaves nothing behind: neither
# its $TMPDIR/fadc-cc.* folder (object, linked library, link log) nor a
# temporary artifact beside -o, and it dies of the signal (exit 128 + N),
# as a shell expects of an interrupted program.  The signal is sent once
# the temporary folder exists, while LLVM compiles a small resnet18 (a few
# seconds), so the test never races the compile's start.
source "$(dirname "$0")/common.bash"
# Job control: without it bash starts background commands with SIGINT
# ignored, and the SIGINT case would test nothing.
set -m
model=$SRC/models/resnet18.ir

interrupt() { # SIGNAL EXIT-STATUS
	local sig=$1 want=$2 td=$tmp/tmp-$1 out=$tmp/out-$1 pid rc i
	mkdir -p "$td" "$out"
	TMPDIR=$td "$FADC" "$model" -D N=2 -D H=32 -D C=8 -D NCLS=10 --tasks vjp \
		-o "$out/model.so" 2>"$tmp/err" &
	pid=$!
	# Up to 60 s for the folder to appear (a loaded machine).
	for ((i = 0; i < 600; i++)); do
		compgen -G "$td/fadc-cc.*" >/dev/null && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	if ! compgen -G "$td/fadc-cc.*" >/dev/null; then
		wait $pid
		rc=$?
		[ $rc -eq 0 ] && { echo "skipped: the compile finished before its folder was seen"; exit 77; }
		cat "$tmp/err" >&2
		fail "the compile failed (exit $rc) before making its $td/fadc-cc.* folder"
	fi
	sleep 0.2
	kill -s "$sig" $pid 2>/dev/null
	wait $pid
	rc=$?
	# A machine fast enough to finish first tests nothing: skip.
	[ $rc -eq 0 ] && { echo "skipped: the compile finished before SIG$sig"; exit 77; }
	[ $rc -eq "$want" ] || { cat "$tmp/err" >&2; fail "SIG$sig: exit $rc, expected $want"; }
	[ -z "$(ls -A "$td")" ] || fail "SIG$sig left in TMPDIR: $(ls -A "$td")"
	[ -z "$(ls -A "$out")" ] || fail "SIG$sig left beside -o: $(ls -A "$out")"
}
interrupt INT 130
interrupt TERM 143
exit 0
