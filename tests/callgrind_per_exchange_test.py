#!/usr/bin/env python3
"""tests/callgrind_per_exchange.py on hand-made callgrind dumps, against
figures computed by hand.

The bench's instruction counts (tests/bench_instructions.sh) come from
real dumps whose numbers no test can predict, so a parser that counted a
call's inclusive cost as the caller's own, lost a compressed name, read
the wrong column of a dump with instruction addresses, or matched the
wrong function as the exchange would pass bench_smoke and change every
published figure. Each dump here is written in callgrind's format (see
valgrind's docs, "Callgrind Format Specification") with one such trap.

    tests/callgrind_per_exchange_test.py
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, 'callgrind_per_exchange.py')

HEADER = """\
# callgrind format
version: 1
creator: callgrind-3.24.0
pid: 4242
cmd: ./client
part: 2

"""

# libplugrl's shape: a C caller (run_one) calls into Go (Feedback), which
# calls memmove; one more call of Feedback is named as callgrind names a
# recursive entry, Feedback'2 (a call from C into Go returns through the
# runtime, and callgrind takes the next for a recursion).
# Own costs: run_one 100 + 20, Feedback 300 + 7 (a line 2 before the
# last: -2), Feedback'2 5, memmove 50 + 50. The lines after calls= (390,
# 100, 60) are the calls' inclusive costs and nobody's own. Names are
# compressed: after their first use, fn=(2) and cfn=(3) carry only the
# number.
GO_DUMP = HEADER + """\
positions: line
events: Ir
summary: 532

ob=(1) /work/lib.so
fl=(1) bench_client.cpp
fn=(1) (anonymous namespace)::run_one(Args const&)
10 100
cfl=(2) client.go
cfn=(2) github.com/p/core/client.(*Client).Feedback
calls=2 40
11 390
+1 20

fl=(2)
fn=(2)
40 300
cfn=(3) runtime.memmove
calls=4 0
41 100
-2 7

fn=(4) github.com/p/core/client.(*Client).Feedback'2
40 5
cfn=(4)
calls=1 40
41 60

fn=(3)
0 50
* 50
totals: 532
"""

# floor-held's shape, with instruction addresses (--dump-instr=yes: two
# position columns, the instruction's and the line's) and the cache
# simulation's events. The exchange is send_two, in an anonymous
# namespace with parameters; send_two_all is another function.
CPP_DUMP = HEADER + """\
positions: instr line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 1000 300 200 30 25 15 0 0 0

ob=(1) /work/floor
fl=(1) bench_floor.cpp
fn=(1) main
0x1000 5 200 60 40 6 4 2
cfn=(2) (anonymous namespace)::send_two(int, bool)
calls=10 0x2000 20
+4 +1 600 180 120 18 14 7
cfn=(3) send_two_all(int)
calls=7 0x3000 30
+4 * 200
fn=(2)
0x2000 20 500 150 100 14 10 5
+8 +1 100 30 20 4 4 2
fn=(3)
0x3000 30 200 60 40 6 7 6
totals: 1000 300 200 30 25 15 0 0 0
"""


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, 'w') as f:
        f.write(textwrap.dedent(text))
    return path


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class PerExchange(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        for f in os.listdir(self.tmp):
            os.unlink(os.path.join(self.tmp, f))
        os.rmdir(self.tmp)

    def test_go_exchange(self):
        # 3 exchanges (calls of Feedback under both its names: 2 + 1);
        # own instructions 120 + 307 + 5 + 100 = 532, 177 an exchange.
        r = run(write(self.tmp, 'go.cg', GO_DUMP), 'github.com/p/core/client.(*Client).Feedback')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, 'exchanges 3 instructions 532 per_exchange 177\n')

    def test_top_functions(self):
        # Own instructions an exchange, costliest first, each under the
        # name callgrind gave it: Feedback 307/3 (its 5 under Feedback'2
        # are a fourth line), run_one 120/3 with its scope and
        # parameters, memmove 100/3.
        r = run(write(self.tmp, 'go.cg', GO_DUMP), 'github.com/p/core/client.(*Client).Feedback', '3')
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], 'exchanges 3 instructions 532 per_exchange 177')
        self.assertEqual([line.split() for line in lines[1:]], [
            ['102', 'github.com/p/core/client.(*Client).Feedback'],
            ['40', '(anonymous', 'namespace)::run_one(Args', 'const&)'],
            ['33', 'runtime.memmove'],
        ])

    def test_cpp_exchange_and_cache_misses(self):
        # send_two by its own name: 10 calls, not send_two_all's 7.
        # Own instructions: main 200, send_two 500 + 100, send_two_all
        # 200: 1000, 100 an exchange (the inclusive 600 and 200 are not
        # counted). The misses come from the totals: I1mr 30 -> 3, D1mr +
        # D1mw 25 + 15 -> 4.
        r = run(write(self.tmp, 'cpp.cg', CPP_DUMP), 'send_two')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, 'exchanges 10 instructions 1000 per_exchange 100 i1_misses 3 d1_misses 4\n')

    def test_no_exchange(self):
        # A dump without the exchange's function (a client that never got
        # to its steady state) is an error, not a division by zero or 0.
        r = run(write(self.tmp, 'cpp.cg', CPP_DUMP), 'gf_recv')
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('no calls to gf_recv', r.stderr)
        self.assertEqual(r.stdout, '')

    def test_misread(self):
        # Own costs that do not add up to the dump's total mean a line was
        # misread: an error, not a figure.
        r = run(write(self.tmp, 'go.cg', GO_DUMP.replace('totals: 532', 'totals: 600')),
                'github.com/p/core/client.(*Client).Feedback')
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("own instructions sum to 532, the dump's total is 600: misread", r.stderr)
        self.assertEqual(r.stdout, '')

    def test_usage(self):
        r = run()
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('usage: callgrind_per_exchange.py FILE FUNCTION [TOP]', r.stderr)


if __name__ == '__main__':
    unittest.main()
