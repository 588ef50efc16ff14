#!/bin/sh
# Runs a command as an ordinary user, for the sandbox tests (which run as root on CI and must
# pass the same way without root). Needs root. Creates the unprivileged account
# `ksmith-sandbox-test` if it does not exist, then runs the command in a private mount
# namespace where PYTHON's environment and each PATH given (files or folders the command reads:
# the test binary, the checkout's test programs or Python package) are reachable even when they
# live in a folder closed to other users (such as root's home, or a `mktemp -d` folder: a tmpfs
# with mode 755 covers that folder and only the paths named are put back; nothing changes
# outside the namespace), with no capability, no supplementary group and no_new_privs. The
# paths themselves must be readable by others (a clone's files are, with the usual umask).
#
#   tests/as_ordinary_user.sh PYTHON [PATH...] -- COMMAND [ARGS...]
set -eu
[ "$(id -u)" = 0 ] || { echo "as_ordinary_user.sh: needs root" >&2; exit 2; }
usage() { echo "usage: as_ordinary_user.sh PYTHON [PATH...] -- COMMAND [ARGS...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
python=$1
shift
extra=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    [ -e "$1" ] || { echo "as_ordinary_user.sh: no such path: $1" >&2; exit 2; }
    extra="$extra
$(realpath "$1")"
    shift
done
[ $# -ge 2 ] || usage
shift
user=ksmith-sandbox-test
id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
paths=$( { "$python" -c 'import os, sys; print("\n".join(sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)})))'; echo "$extra"; } | sed '/^$/d' | sort -u)
stage=$(mktemp -d /tmp/ksmith-as-user-XXXXXX)
status=0
unshare --mount --propagation private -- sh -eu -c '
user=$1; paths=$2; stage=$3; shift 3
mount -t tmpfs -o mode=700 ksmith-as-user "$stage"
n=0
# The first folder on the way to each path that others may not enter (the path itself counts
# when it is a folder).
for p in $paths; do
    d=""
    for part in $(echo "$p" | tr / " "); do
        d="$d/$part"
        [ -d "$d" ] || break
        case "$(stat -c %A "$d")" in *x|*t) ;; *) echo "$d $p"; break ;; esac
    done
done | sort > "$stage/closed"
for blocker in $(cut -d" " -f1 "$stage/closed" | sort -u); do
    grep "^$blocker " "$stage/closed" | cut -d" " -f2 > "$stage/list"
    while read -r p; do
        n=$((n + 1))
        if [ -d "$p" ]; then mkdir "$stage/$n"; else : > "$stage/$n"; fi
        mount --bind "$p" "$stage/$n"
        echo "$n $p" >> "$stage/binds"
    done < "$stage/list"
    mount -t tmpfs -o mode=755 ksmith-as-user "$blocker"
    while read -r i p; do
        if [ -d "$stage/$i" ]; then mkdir -p "$p"; else mkdir -p "$(dirname "$p")"; : > "$p"; fi
        mount --bind "$stage/$i" "$p"
    done < "$stage/binds"
    : > "$stage/binds"
done
exec setpriv --reuid "$user" --regid "$user" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"
' sh "$user" "$paths" "$stage" "$@" || status=$?
rmdir "$stage"
exit "$status"
