#!/bin/sh
# Checks that attn.h's map of itself matches the code: the CONTENTS tags are exactly the section
# banners' tags (in order), the KERNEL NAMES list is exactly the set of ATTN__FN names, and the
# first line names ATTN_VERSION_STRING; given an object file of the implementation unit (OBJ),
# also that every function symbol in it is found by grepping attn.h for its stem (the name
# without the ISA suffix - the names of the ISA table, ATTN__ISA_LIST - and the compiler's
# .isra/.constprop/.part/.cold clones and ._omp_fn regions). Also that no compile guard defined
# as 0 as well as 1 (the ISA table's ATTN__HAVE_<ISA>) is tested with #ifdef, #ifndef or
# defined() in attn.h or the tests beside it: that test is true for 0 too. Beside a README.md
# and examples/quickstart.c (the repository), also that the README's quick start and the header's QUICK START (its indentation
# of seven spaces taken off) are examples/quickstart.c, and that the front door stays small:
# README.md at most 16 KB, docs/PERF.md at most 60 KB.
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
D=$(dirname "$H")
beside=$(ls "$D"/tests/*.c "$D"/tests/*.h 2>/dev/null)
for guard in $(sed -n 's/^#define \(ATTN__HAVE_[A-Z0-9_]*\) 0$/\1/p' "$H" | sort -u); do
    if grep -nE "(#ifn?def|defined *\(?) *$guard\b" "$H" $beside; then
        echo "$guard is 0 or 1: test it with #if, not #ifdef or defined() (above)"; rc=1
    fi
done
isas=$(sed -n '/^#define ATTN__ISA_LIST/,/^$/p' "$H" | sed -n 's/^ *X(ATTN_ISA_[A-Z0-9_]*, *[0-9]*, *"\([a-z0-9_]*\)".*/\1/p' | paste -sd '|' -)
[ -n "$isas" ] || { echo "no ISA names found in ATTN__ISA_LIST"; rc=1; }
if [ -n "$OBJ" ]; then
    nm "$OBJ" | awk '$2 ~ /^[tT]$/ { print $3 }' |
        sed -E "s/\.(isra|constprop|part|cold|lto_priv|_omp_fn)(\.[0-9]+)*//g; s/__($isas)\$//" |
        sort -u > "$T.syms"
    while read -r name; do
        grep -q -- "$name" "$H" || { echo "function symbol not found in $H: $name"; rc=1; }
    done < "$T.syms"
fi
if [ -f "$D/README.md" ] && [ -f "$D/examples/quickstart.c" ]; then
    # a copy's lines, its trailing blank lines left out
    body='s == 2 { if ($0 == "") { blank++; next } for (; blank > 0; blank--) print ""; print }'
    awk '/^## Quick start/ { s = 1; next } s == 1 && /^```c$/ { s = 2; next }
         s == 2 && /^```$/ { exit } '"$body" "$D/README.md" > "$T.readme"
    awk '/^   QUICK START/ { s = 2; next } s == 2 && /^   [A-Z]/ { exit } '"$body" "$H" |
        sed 's/^       //' > "$T.header"
    for copy in readme header; do
        if ! diff "$T.$copy" "$D/examples/quickstart.c" > "$T.diff"; then
            echo "the $copy's quick start (<) is not examples/quickstart.c (>):"; cat "$T.diff"; rc=1
        fi
    done
fi
# the user's manual and the performance log within their sizes (bytes), where they are
for limit in README.md:16384 docs/PERF.md:61440; do
    f="$D/${limit%%:*}"; max=${limit#*:}
    [ -f "$f" ] || continue
    size=$(wc -c < "$f")
    if [ "$size" -gt "$max" ]; then echo "${f#./} is $size bytes, more than its $max"; rc=1; fi
done
rm -f "$T".*
exit $rc
