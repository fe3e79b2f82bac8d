#!/usr/bin/env python3
"""Instructions per exchange from a callgrind dump (tests/bench_instructions.sh).

usage: callgrind_per_exchange.py FILE FUNCTION [TOP]

FILE is one callgrind output file (one dump: the counts since the dump
before it). FUNCTION is a function the client calls exactly once per
exchange: a Go function's full name as callgrind gives it, or a C++
function's own name (callgrind's "(anonymous namespace)::send_two(int,
...)" is "send_two"); its call count is the dump's exchange count. Prints one line,

    exchanges N instructions I per_exchange P [i1_misses M d1_misses D]

where I is the instructions executed in user space by every thread of the
process (each function's own cost, summed), and, when callgrind simulated
the caches (--cache-sim=yes), M and D the first-level instruction and
data cache misses per exchange (reads and writes) it counted; then, with
TOP, the TOP functions by their own instructions per exchange.

Why a function's own costs and not inclusive ones: callgrind's call tree
is confused where Go switches stacks (a call from C into Go returns
through the runtime, and callgrind counts some calls twice), but the cost
it charges to each function itself is exact.
"""
import collections
import re
import sys

NAMED = re.compile(r'c?fn=\((\d+)\)(?: (.*))?$')


def parse(path):
    """Each function's own instructions, each function's calls, and the
    file's totals by event name."""
    names = {}
    events, totals = [], []
    positions = 1  # columns before the events: the line, or instr and line
    own = collections.Counter()
    calls = collections.Counter()
    fn = cfn = None
    after_call = False

    def name(line):
        m = NAMED.match(line)
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), m.group(1))

    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if line.startswith('positions:'):
                positions = len(line.split()[1:])
            elif line.startswith('events:'):
                events = line.split()[1:]
            elif line.startswith(('summary:', 'totals:')):
                totals = [int(x) for x in line.split()[1:]]
            elif line.startswith('fn='):
                fn = name(line)
            elif line.startswith('cfn='):
                cfn = name(line)
            elif line.startswith('calls='):
                calls[cfn] += int(line.split('=', 1)[1].split()[0])
                after_call = True  # the next cost line is the call's, inclusive
            elif line[:1].isdigit() or line[:1] in '+-*':
                parts = line.split()
                if len(parts) > positions:
                    if after_call:
                        after_call = False
                    else:
                        own[fn] += int(parts[positions])  # Ir, the first event
    return own, calls, dict(zip(events, totals))


def named(name, key):
    """Whether callgrind's name for a function is key: the same, but for
    callgrind's recursion mark ('2), or a C++ function's own name without
    its namespaces and parameters."""
    name = name.split("'")[0]
    if name == key:
        return True
    bare = re.sub(r'\(.*$', '', name.replace('(anonymous namespace)::', ''))
    return bare.split('::')[-1] == key


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.split('\n\n')[1])
    path, key = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) == 4 else 0
    own, calls, totals = parse(path)
    exchanges = sum(n for f, n in calls.items() if f and named(f, key))
    if exchanges == 0:
        sys.exit(f'{path}: no calls to {key}: no exchange in this dump')
    total = sum(own.values())
    # Every instruction is some function's own: a sum that is not the
    # dump's total is a line misread (a position form not parsed, a
    # call's inclusive cost taken as the caller's own).
    if 'Ir' in totals and total != totals['Ir']:
        sys.exit(f'{path}: functions\' own instructions sum to {total}, the dump\'s total is {totals["Ir"]}: misread')
    line = f'exchanges {exchanges} instructions {total} per_exchange {total / exchanges:.0f}'
    if 'I1mr' in totals:
        d1 = totals.get('D1mr', 0) + totals.get('D1mw', 0)
        line += f' i1_misses {totals["I1mr"] / exchanges:.0f} d1_misses {d1 / exchanges:.0f}'
    print(line)
    for f, n in own.most_common(top):
        # The whole name: a C++ name's scope and parameters tell its
        # overloads and namespaces apart (cutting at a colon left
        # "Counter&)'2" of bench_client.cpp's run_one).
        where = f or '?'
        print(f'  {n / exchanges:8.0f}  {where[:100]}')


if __name__ == '__main__':
    main()
