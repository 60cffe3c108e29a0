#!/bin/sh
# Regenerates crates/symbolize/src/python/offsets.json: the CPython structure offsets pkprof walks
# (docs/design.md, "Python frames"), one entry per minor version, from each version's own internal
# headers (offsets.c). Usage: tools/python_offsets/gen.sh PREFIX... (an installed CPython's prefix,
# e.g. ~/.pyenv/versions/3.12.1: its include/pythonX.Y holds the internal headers).
set -eu
here=$(dirname "$0")
out=$here/../../crates/symbolize/src/python/offsets.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '{\n' > "$tmp/json"
sep=
for prefix in "$@"; do
	inc=$(ls -d "$prefix"/include/python3.*)
	minor=${inc##*/python}
	gcc -I"$inc" -I"$inc/internal" -o "$tmp/off" "$here/offsets.c"
	printf '%s  "%s": ' "$sep" "$minor" >> "$tmp/json"
	"$tmp/off" | sed 's/^/  /; 1s/^  //' >> "$tmp/json"
	sep=',
'
done
printf '\n}\n' >> "$tmp/json"
mkdir -p "$(dirname "$out")"
cp "$tmp/json" "$out"
echo "wrote $out"
