package ledger

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"
)

// hasEqualRunBytewise reports whether cur and prev, of equal length, hold
// a run of minEqualRun equal bytes anywhere: what oneRun says they do not.
func hasEqualRunBytewise(cur, prev []byte) bool {
	run := 0
	for i := range cur {
		if cur[i] != prev[i] {
			run = 0
			continue
		}
		if run++; run >= minEqualRun {
			return true
		}
	}
	return false
}

// TestOneRunEveryPlacement: oneRun finds a run of equal bytes of each
// length from 1 to 6 at every offset of spans of every length up to 100,
// and one of 3 equal bytes after another (a differing byte between, which
// its search for equal pairs flags and its exact check passes), with
// differing bytes whose XOR has every 16-bit lane pattern that a borrow
// in equalPairs could turn (0x01, 0x80, 0xff, 0x0100, 0x8000): in every
// word, pair and 16-byte block of its search, in the windows it checks
// around a pair, and in the tail after the last whole 16 bytes.
func TestOneRunEveryPlacement(t *testing.T) {
	diffs := []byte{0x01, 0x80, 0xff, 0x7f, 0x10}
	check := func(cur, prev []byte, what string) {
		t.Helper()
		if got, want := oneRun(cur, prev), !hasEqualRunBytewise(cur, prev); got != want {
			t.Fatalf("%s: n %d, cur %x\nprev %x: oneRun %v, want %v", what, len(cur), cur, prev, got, want)
		}
	}
	for n := 0; n <= 100; n++ {
		for di, d := range diffs {
			cur := make([]byte, n)
			for i := range cur {
				cur[i] = byte(i*7 + di)
			}
			differing := func() []byte {
				prev := make([]byte, n)
				for i := range prev {
					// The lanes' patterns: alternate d and d's others,
					// so that a pair's XOR is 0x0101, 0x80ff, ...
					prev[i] = cur[i] ^ diffs[(di+i)%len(diffs)]
					if i%2 == 0 {
						prev[i] = cur[i] ^ d
					}
				}
				return prev
			}
			check(cur, differing(), "no equal byte")
			for l := 1; l <= 6; l++ {
				for p := 0; p+l <= n; p++ {
					prev := differing()
					copy(prev[p:p+l], cur[p:p+l])
					check(cur, prev, "one run")
					if q := p + l + 1; l == 3 && q+3 <= n {
						copy(prev[q:q+3], cur[q:q+3]) // 3, a differing byte, 3
						check(cur, prev, "two runs of 3")
					}
				}
			}
		}
	}
}

// FuzzRecvSpans drives ReceivedAt with messages of lengths 0 to 200 whose
// changed span moves, shrinks, grows, vanishes and covers the whole
// message, with runs of equal bytes of every length at every offset inside
// it, and checks every frame the caller queues against a bytewise oracle:
// a span frame exactly when the last message taken had this length and
// the bytewise changed span saves its 8 bytes, with that span's offset
// and bytes, and tagged as one run exactly when it holds no run of 4
// equal bytes (changedSpan's guess from the last span, oneRun's search
// for equal pairs). Then the ledger must read back every message taken.
func FuzzRecvSpans(f *testing.F) {
	f.Add(uint8(40), []byte{0, 1, 5, 0, 2, 9, 0, 0, 3, 3, 0})
	f.Add(uint8(32), []byte{2, 17, 0, 2, 1, 0, 2, 30, 0, 4, 0, 0})
	f.Add(uint8(17), []byte{0, 5, 16, 0, 6, 0, 0, 7, 0, 0, 8, 0})
	f.Add(uint8(100), []byte{0, 2, 3, 0, 2, 99, 0, 2, 50, 0, 0, 1, 3, 0, 4, 1, 0})
	f.Fuzz(func(t *testing.T, n0 uint8, ops []byte) {
		if len(ops) > 600 {
			return
		}
		path := filepath.Join(t.TempDir(), "l")
		w, err := Create(path, Options{FlushInterval: 250e6})
		if err != nil {
			t.Fatal(err)
		}
		release := HoldFlushes(w)
		msg := make([]byte, int(n0)%201)
		for i := range msg {
			msg[i] = byte(i * 37)
		}
		var want [][]byte
		var last []byte              // the last message the queue took
		based := false               // and the writer patches the next against it
		refuse, refusedN := false, 0 // the next receive is refused
		var twoBack []byte           // the message before the last one taken
		lastFrame := func() []byte {
			q := w.queue
			for len(q) > 0 {
				n := frameHeader + int(binary.LittleEndian.Uint32(q[1:]))
				if n == len(q) {
					return q
				}
				q = q[n:]
			}
			t.Fatal("no frame queued")
			return nil
		}
		receive := func() {
			if refuse {
				refused(w, func() { w.Received(msg) })
				refuse, based = false, false
				refusedN++
				return
			}
			w.Received(msg)
			w.mu.Lock()
			fr := bytes.Clone(lastFrame())
			w.mu.Unlock()
			wantTag, wantLo, wantHi := byte(frameRecv), 0, len(msg)
			if based && len(msg) == len(last) {
				lo, hi := changedSpanBytewise(msg, last)
				if hi-lo+8 < len(msg) {
					wantTag, wantLo, wantHi = frameRecvSpan, lo, hi
					if !hasEqualRunBytewise(msg[lo:hi], last[lo:hi]) {
						wantTag = frameRecvRun
					}
				}
			}
			p := fr[frameHeader:]
			switch {
			case fr[0] != wantTag:
				t.Fatalf("msg %x after %x (based %v): frame tag %d, want %d", msg, last, based, fr[0], wantTag)
			case wantTag == frameRecv && !bytes.Equal(p[8:], msg):
				t.Fatalf("msg %x: a whole frame of %x", msg, p[8:])
			case wantTag != frameRecv:
				n, lo := int(binary.LittleEndian.Uint32(p[8:])), int(binary.LittleEndian.Uint32(p[12:]))
				if n != len(msg) || lo != wantLo || !bytes.Equal(p[recvSpanFixed:], msg[wantLo:wantHi]) {
					t.Fatalf("msg %x after %x: span of %d at %d for %d bytes, want %x at %d", msg, last, len(p)-recvSpanFixed, lo, n, msg[wantLo:wantHi], wantLo)
				}
			}
			want = append(want, bytes.Clone(msg))
			twoBack, last = last, bytes.Clone(msg)
			based = len(msg) <= maxDelta
		}
		for k := 0; k+1 < len(ops); k += 2 {
			op, a := ops[k], int(ops[k+1])
			switch op % 10 {
			case 0:
				receive()
			case 1: // one byte
				if len(msg) > 0 {
					msg[a%len(msg)] ^= byte(op>>4) | 1
				}
			case 2: // a span of 1 to 16 changed bytes whose inner
				// bytes are equal but for every (g+1)-th
				if len(msg) > 0 {
					at, l, g := a%len(msg), 1+int(op>>4), int(op>>4)&3
					for i := at; i < min(len(msg), at+l); i++ {
						if i == at || i == at+l-1 || (i-at)%(g+1) == 0 {
							msg[i] ^= byte(i) | 1
						}
					}
				}
			case 3: // the first and the last byte
				if len(msg) > 0 {
					msg[0]++
					if op&16 != 0 {
						msg[len(msg)-1]++
					}
				}
			case 4: // every byte, or every byte but a run of a%8 at op>>4
				for i := range msg {
					msg[i] = ^msg[i]
				}
				if op&0x80 != 0 && len(msg) > 0 && len(last) == len(msg) {
					at := int(op>>4&7) * 3 % len(msg)
					end := min(len(msg), at+a%8)
					copy(msg[at:end], last[at:end])
				}
			case 5: // another length: a%20 bytes more or fewer
				if op&16 != 0 {
					for i := 0; i < a%20 && len(msg) < 200; i++ {
						msg = append(msg, byte(a+i))
					}
				} else {
					msg = msg[:max(0, len(msg)-a%20)]
				}
			case 6: // back to the message before the last one
				if twoBack != nil {
					msg = append(msg[:0], twoBack...)
				}
			case 7: // the last one again, a byte changed at a
				if last != nil {
					msg = append(msg[:0], last...)
					if len(msg) > 0 && op&16 != 0 {
						msg[a%len(msg)]++
					}
				}
			case 8:
				refuse = true
			case 9:
				release = flushNow(w, release)
			}
		}
		receive()
		release()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, lost := readBack(t, w.Path(), KindRecv)
		checkReadBack(t, "receives", got, want, lost, refusedN)
	})
}
