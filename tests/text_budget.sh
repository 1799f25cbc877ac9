#!/bin/sh
# The code-size budget of the implementation unit (#define ATTN_IMPLEMENTATION and #include
# "attn.h", nothing else) as gcc builds it at -O2 with every ISA compiled in (no -march flags):
# its .text (GNU size) at most TEXT_KB (300), and paged decode's functions (every symbol whose
# name holds "decode", by nm) at most DECODE_KB (150, half the budget). Machine-independent: the
# same compiler gives the same bytes on any x86-64 host. Prints the figures and, last, PASS or
# FAIL. Usage: sh tests/text_budget.sh BUILD_DIR [GCC]
B=$1/text_budget; GCC=${2:-gcc}
TEXT_KB=${TEXT_KB:-300}; DECODE_KB=${DECODE_KB:-150}
mkdir -p "$B"
if ! command -v "$GCC" >/dev/null 2>&1 || ! command -v size >/dev/null 2>&1 ||
        ! command -v nm >/dev/null 2>&1; then
    echo "SKIP: needs $GCC, size and nm"; exit 0
fi
case $("$GCC" -dumpmachine 2>/dev/null) in
    x86_64*) ;;
    *) echo "SKIP: the budget is for an x86-64 $GCC (every ISA compiled in)"; exit 0 ;;
esac
printf '#define ATTN_IMPLEMENTATION\n#include "attn.h"\n' > "$B/impl.c"
"$GCC" -std=c99 -O2 -I. -c "$B/impl.c" -o "$B/impl.o" || { echo "FAIL: does not compile"; exit 1; }
text=$(size "$B/impl.o" | awk 'NR == 2 { print $1 }')
decode=$(nm -S -t d "$B/impl.o" | awk '$3 ~ /^[tT]$/ && $4 ~ /decode/ { s += $2 } END { print s + 0 }')
echo "$($GCC --version | head -n 1): .text $text bytes (budget $((TEXT_KB * 1024))), decode" \
     "$decode bytes (budget $((DECODE_KB * 1024)), $((decode * 100 / text))% of .text)"
if [ "$text" -le $((TEXT_KB * 1024)) ] && [ "$decode" -le $((DECODE_KB * 1024)) ]; then
    echo PASS
else
    echo FAIL; exit 1
fi
