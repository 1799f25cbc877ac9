#!/bin/sh
# Checks that attn.h's map of itself matches the code: the CONTENTS tags are exactly the section
# banners' tags (in order), the KERNEL NAMES list is exactly the set of ATTN__FN names, and the
# first line names ATTN_VERSION_STRING; given an object file of the implementation unit (OBJ),
# also that every function symbol in it is found by grepping attn.h for its stem (the name
# without the ISA suffix and the compiler's .isra/.constprop/.part/.cold clones).
# Usage: sh tests/house.sh [attn.h [OBJ]]. Prints what differs; exit status 0 when all agree.
H=${1:-attn.h}; OBJ=${2:-}; T=${TMPDIR:-/tmp}/attn_house.$$; rc=0
sed -n '/^\/\* CONTENTS/,/\*\/$/p' "$H" | grep -o '\[[0-9A-Z][a-z]*\]' > "$T.contents"
awk '/^\/\* -----------------------------------------/ { getline; if (match($0, /^   \[[0-9A-Z][a-z]*\]/)) print substr($0, 4, RLENGTH - 3) }' \
    "$H" > "$T.banners"
LC_ALL=C sort -u "$T.contents" > "$T.c"; LC_ALL=C sort "$T.banners" > "$T.b"
if ! cmp -s "$T.c" "$T.b"; then echo "CONTENTS and the banners disagree:"; diff "$T.c" "$T.b"; rc=1; fi
if ! cmp -s "$T.banners" "$T.b"; then echo "section tags out of order:"; tr '\n' ' ' < "$T.banners"; echo; rc=1; fi
sed -n '/KERNEL NAMES/,/\*\//p' "$H" | sed '1d' | tr ' ' '\n' | grep '^attn__' | sed 's/\*\///' | sort -u > "$T.listed"
sed '/KERNEL NAMES/,/\*\//d' "$H" | grep -o 'ATTN__FN(attn__[a-z0-9_]*)' | sed 's/ATTN__FN(\(.*\))/\1/' | sort -u > "$T.used"
if ! cmp -s "$T.listed" "$T.used"; then echo "KERNEL NAMES (<) and the ATTN__FN names (>) differ:"; diff "$T.listed" "$T.used"; rc=1; fi
v=$(sed -n 's/^#define ATTN_VERSION_STRING "\(.*\)"/\1/p' "$H")
if ! head -n 1 "$H" | grep -q " - v$v - "; then echo "the first line's version is not $v:"; head -n 1 "$H"; rc=1; fi
if [ -n "$OBJ" ]; then
    nm "$OBJ" | awk '$2 ~ /^[tT]$/ { print $3 }' |
        sed -E 's/\.(isra|constprop|part|cold|lto_priv)(\.[0-9]+)*//g; s/__(scalar|avx2|avx512|neon)$//' |
        sort -u > "$T.syms"
    while read -r name; do
        grep -q -- "$name" "$H" || { echo "function symbol not found in $H: $name"; rc=1; }
    done < "$T.syms"
fi
rm -f "$T".*
exit $rc
