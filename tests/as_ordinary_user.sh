#!/bin/sh
# Runs a command as an ordinary user, for the sandbox tests (which run as root on CI and must
# pass the same way without root). Needs root. Creates the unprivileged account
# `ksmith-sandbox-test` if it does not exist, then runs the command in a private mount
# namespace where the folders of PYTHON's environment are traversable even when they live in a
# folder closed to other users (such as root's home: a tmpfs with mode 755 covers that folder
# and only the environment is put back; nothing changes outside the namespace), with no
# capability, no supplementary group and no_new_privs.
#
#   tests/as_ordinary_user.sh PYTHON -- COMMAND [ARGS...]
set -eu
[ "$(id -u)" = 0 ] || { echo "as_ordinary_user.sh: needs root" >&2; exit 2; }
python=$1
[ "$2" = "--" ] || { echo "usage: as_ordinary_user.sh PYTHON -- COMMAND [ARGS...]" >&2; exit 2; }
shift 2
user=ksmith-sandbox-test
id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
paths=$("$python" -c 'import os, sys; print("\n".join(sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)})))')
stage=$(mktemp -d /tmp/ksmith-as-user-XXXXXX)
status=0
unshare --mount --propagation private -- sh -eu -c '
user=$1; paths=$2; stage=$3; shift 3
mount -t tmpfs -o mode=700 ksmith-as-user "$stage"
n=0
# The first folder on the way to each path that others may not enter.
for p in $paths; do
    d=""
    for part in $(echo "$p" | tr / " "); do
        d="$d/$part"
        case "$(stat -c %A "$d")" in *x|*t) ;; *) echo "$d $p"; break ;; esac
    done
done | sort > "$stage/closed"
for blocker in $(cut -d" " -f1 "$stage/closed" | sort -u); do
    grep "^$blocker " "$stage/closed" | cut -d" " -f2 > "$stage/list"
    while read -r p; do n=$((n + 1)); mkdir "$stage/$n"; mount --bind "$p" "$stage/$n"; echo "$n $p" >> "$stage/binds"; done < "$stage/list"
    mount -t tmpfs -o mode=755 ksmith-as-user "$blocker"
    while read -r i p; do mkdir -p "$p"; mount --bind "$stage/$i" "$p"; done < "$stage/binds"
    : > "$stage/binds"
done
exec setpriv --reuid "$user" --regid "$user" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"
' sh "$user" "$paths" "$stage" "$@" || status=$?
rmdir "$stage"
exit "$status"
