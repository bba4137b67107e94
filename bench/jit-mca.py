#!/usr/bin/env python3
"""The hot path of a generated function as straight-line assembly for
llvm-mca (a static model of the CPU's ports: which resource bounds a loop).

Takes the listing `bench/callgrind-jit.py` prints (executions per packet
beside each instruction) and the offset of the loop's first instruction;
from there it follows, at each conditional jump, the side that ran more
often and every unconditional jump, until it is back at the start. The
jumps themselves become not-taken branches; objdump's continuation lines
(raw bytes) are left out.

    bench/callgrind-jit.py cg.out PID sluice_batch N > listing.txt
    bench/jit-mca.py listing.txt 33 > hot.s
    llvm-mca -mcpu=znver3 -iterations=300 -bottleneck-analysis hot.s"""
import re
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    listing, head = sys.argv[1], int(sys.argv[2], 16)
    runs, order = {}, []
    for line in open(listing):
        m = re.match(r"\s*([0-9.]+)\s+([0-9a-f]+):\s*(.*)", line)
        if m:
            off = int(m.group(2), 16)
            runs[off] = (float(m.group(1)), m.group(3).strip())
            order.append(off)
    if head not in runs:
        sys.exit(f"no instruction at offset {head:x}")
    after = dict(zip(order, order[1:]))
    out, at = [".Lx:"], head
    while True:
        _, text = runs[at]
        jump = re.match(r"(j\w+)\s+0x([0-9a-f]+)", text)
        if jump and jump.group(1) == "jmp":
            at = int(jump.group(2), 16)
        elif jump:
            target, next_ = int(jump.group(2), 16), after[at]
            out.append(f"{jump.group(1)} .Lx")
            taken = runs.get(target, (0.0, ""))[0] > runs.get(next_, (0.0, ""))[0]
            at = target if taken else next_
        else:
            if not re.fullmatch(r"[0-9a-f]{2}( [0-9a-f]{2})*|\(bad\)|\.byte.*", text):
                out.append(text)
            at = after[at]
        if at == head:
            break
        if len(out) > 5000:
            sys.exit("the path never came back to the start offset")
    print("\n".join(out))


main()
