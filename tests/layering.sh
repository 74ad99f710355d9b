#!/usr/bin/env bash
# tests/layering.sh [ROOT] -- the module layering of docs/ARCHITECTURE.md,
# checked on the sources: every `#include "x.h"` of a module's files must
# name a header of the module itself or of a module it may depend on (the
# matrix below, which is CMake's target_link_libraries graph written out),
# and no library source reaches into another folder by a relative path
# ("../ir/x.h"), which would bypass the include directories that CMake
# grants through those links.  The compiler already refuses a header whose
# folder is not on the include path; this catches the two ways around it:
# a relative path, and a link added in CMakeLists.txt that the design does
# not allow.  Cheap: grep and a table, no build needed.
set -u
root=${1:-${FADC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
cd "$root" || exit 1

# The module a file belongs to.  runtime/fileio.[ch] is a library of its
# own (fadc_fileio, below the frontend and the runtime alike), and
# include/fadc.h is the runtime's public API.
module_of() {
	case $1 in
	runtime/fileio.*) echo fileio ;;
	include/*) echo runtime ;;
	tools/fadc/harness.*) echo harness ;;
	*/*) echo "${1%%/*}" ;;
	esac
}

# May module $1 include headers of module $2?  (Itself always.)  Each row
# is a module and what it links in CMakeLists.txt, transitively.
allowed() {
	case $1 in
	support) deps="" ;;
	fileio) deps="support" ;;
	ir) deps="support" ;;
	frontend) deps="ir support fileio" ;;
	passes) deps="ir support" ;;
	runtime) deps="fileio support" ;;
	codegen) deps="passes ir support runtime fileio" ;;
	harness) deps="codegen passes ir support runtime fileio" ;;
	bench) deps="frontend passes ir support runtime fileio" ;;
	tools) deps="harness codegen frontend passes ir support runtime fileio" ;;
	*) return 1 ;;
	esac
	[ "$1" = "$2" ] && return 0
	for d in $deps; do [ "$d" = "$2" ] && return 0; done
	return 1
}

# Known exceptions, each with its reason; remove a line when its cause is gone.
exception() {
	case "$1|$2" in
	esac
	return 1
}

# Every project header by base name (they are unique) -> its path.  The
# X-macro lists (ops.def, tasks.def, dtypes.def) are headers too: including
# one is depending on its module.
declare -A where
while IFS= read -r h; do
	b=${h##*/}
	if [ -n "${where[$b]:-}" ]; then
		echo "layering: two headers named $b: ${where[$b]} and $h" >&2
		exit 1
	fi
	where[$b]=$h
done < <(find support ir frontend passes runtime codegen bench include tools -name '*.h' -o -name '*.def' | sort)

bad=0
while IFS= read -r f; do
	from=$(module_of "$f")
	while IFS= read -r inc; do
		if exception "$f" "$inc"; then
			continue
		fi
		case $inc in
		*/*)
			echo "$f: #include \"$inc\": a path into another folder (give the module a link in CMakeLists.txt and include \"${inc##*/}\")"
			bad=1
			continue ;;
		esac
		h=${where[$inc]:-}
		[ -z "$h" ] && continue # generated or a test's own header
		to=$(module_of "$h")
		if ! allowed "$from" "$to"; then
			echo "$f: #include \"$inc\": $from may not depend on $to (docs/ARCHITECTURE.md)"
			bad=1
		fi
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find support ir frontend passes runtime codegen bench include tools -name '*.[ch]' | sort)
if [ $bad = 0 ]; then
	echo "layering: ok"
fi
exit $bad
