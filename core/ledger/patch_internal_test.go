package ledger

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// appendPatchBytewise is the patch rule byte by byte, as the writer first
// did it: appendPatch must give the same patches a word at a time. It
// returns the patch's runs and their new bytes (format version 3), and
// the patch as format version 2 coded it, each run's new bytes inline.
func appendPatchBytewise(cur, prev []byte) (runs, lits, inline []byte) {
	n, i, kept := len(cur), 0, 0
	for i < n {
		for i < n && cur[i] == prev[i] {
			i++
		}
		if i == n {
			break
		}
		j := i + 1
		for j < n {
			if cur[j] != prev[j] {
				j++
				continue
			}
			k := j // an equal run: end the change if it is long enough
			for k < n && k-j < minEqualRun && cur[k] == prev[k] {
				k++
			}
			if k-j >= minEqualRun || k == n {
				break
			}
			j = k
		}
		run := binary.AppendUvarint(binary.AppendUvarint(nil, uint64(i-kept)), uint64(j-i))
		runs = append(runs, run...)
		lits = append(lits, cur[i:j]...)
		inline = append(append(inline, run...), cur[i:j]...)
		i, kept = j, j
	}
	return runs, lits, inline
}

// checkPatch checks that appendPatch codes cur against prev as the byte
// rule does, and that the reader's history decodes the patch back to cur,
// and the byte rule's patch as format version 2 coded it too.
func checkPatch(t *testing.T, cur, prev []byte) {
	t.Helper()
	got, gotLits := appendPatch(nil, []byte("before"), cur, prev, 0)
	runs, lits, inline := appendPatchBytewise(cur, prev)
	if !bytes.Equal(got, runs) || !bytes.Equal(gotLits, append([]byte("before"), lits...)) {
		t.Fatalf("cur %x\nprev %x\npatch %x, literals %x\nbyte rule %x, %x", cur, prev, got, gotLits, runs, lits)
	}
	for _, v2 := range []bool{false, true} {
		var h history
		if _, err := h.decode(prev, 0, 1, nil); err != nil {
			t.Fatal(err)
		}
		patch, rest := got, append(bytes.Clone(lits), "after"...)
		src := &rest
		if v2 {
			patch, src = inline, nil
		}
		dec, err := h.decode(patch, 1, 1, src)
		if err != nil {
			t.Fatalf("version 2 %v: cur %x\nprev %x\npatch %x: %v", v2, cur, prev, patch, err)
		}
		if !bytes.Equal(dec, cur) || (!v2 && string(rest) != "after") {
			t.Fatalf("version 2 %v: cur %x\nprev %x\npatch %x decodes to %x, leaving literals %q", v2, cur, prev, patch, dec, rest)
		}
	}
}

// TestPatch compares appendPatch with the byte rule on messages of every
// length up to a few words, with differences placed at random, sparse and
// dense (an action's float32 data: most bytes of every value change), and
// on the edge cases of a word: equal runs of 3, 4 and 5 bytes inside a
// word and across two, at a message's ends.
func TestPatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 80; n++ {
		for _, density := range []float64{0, 0.02, 0.1, 0.3, 0.5, 0.8, 1} {
			for rep := 0; rep < 50; rep++ {
				prev := make([]byte, n)
				for i := range prev {
					prev[i] = byte(rng.IntN(256))
				}
				cur := bytes.Clone(prev)
				for i := range cur {
					if rng.Float64() < density {
						cur[i] ^= byte(1 + rng.IntN(255))
					}
				}
				checkPatch(t, cur, prev)
			}
		}
	}
	// Every pattern of differing bytes over 12 bytes: all runs a word's
	// edges can cut.
	for n := 1; n <= 12; n++ {
		for mask := 0; mask < 1<<n; mask++ {
			prev, cur := make([]byte, n), make([]byte, n)
			for i := 0; i < n; i++ {
				if mask&(1<<i) != 0 {
					cur[i] = 1
				}
			}
			checkPatch(t, cur, prev)
		}
	}
	// Float32 actions whose low mantissa bytes change, at every alignment.
	for off := 0; off < 8; off++ {
		prev := make([]byte, off+224+5)
		cur := bytes.Clone(prev)
		for k := off; k+4 <= off+224; k += 4 {
			cur[k], cur[k+1] = 1, 2
		}
		checkPatch(t, cur, prev)
	}
}

// FuzzPatch: for any message and earlier message of its length,
// appendPatch gives the byte rule's patch and the patch decodes back.
func FuzzPatch(f *testing.F) {
	f.Add([]byte("abcdefghijklmnopqrstuvwxyz"), []byte("abcdEfghijklmNOpqrsTuvwxyZ"))
	f.Add(make([]byte, 70), bytes.Repeat([]byte{0, 1, 0, 0, 0, 2, 2, 0}, 9))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		n := min(len(a), len(b))
		checkPatch(t, a[:n], b[:n])
	})
}

// TestCoded codes runs of messages, as the writer does, each with a
// range said to hold every byte that differs from the message depth back
// (the whole message, or a random range that does, as a send queued by
// its changes gives), and checks each record against the patch of the
// whole message (appendPatchBytewise, against the message the byte rule
// picks) and that the reader's history decodes it back: coding only the
// range must not change what is recorded.
func TestCoded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, depth := range []int{1, 2} {
		var coder, reader history
		var past [][]byte // the messages coded, newest last
		lengths := []int{40, 41, 40, 41, 200, 41, 200, 3, 3, 0, 200, 40, 40}
		for rep := 0; rep < 400; rep++ {
			n := lengths[rep%len(lengths)]
			// A message like an earlier one of its length, a few bytes changed.
			msg := make([]byte, n)
			for i := len(past) - 1; i >= 0; i-- {
				if len(past[i]) == n {
					copy(msg, past[i])
					break
				}
			}
			for k := rng.IntN(4); k > 0 && n > 0; k-- {
				msg[rng.IntN(n)] ^= byte(1 + rng.IntN(255))
			}
			if rep%17 == 0 {
				for i := range msg {
					msg[i] = byte(rng.Uint32())
				}
			}
			// The range: the whole message, or, when the message depth
			// back has its length, the bytes that differ from it, widened
			// at random.
			lo, hi := 0, n
			if back := len(past) - depth; rng.IntN(2) == 0 && back >= 0 && len(past[back]) == n {
				lo, hi = n, n
				for i := range msg {
					if msg[i] != past[back][i] {
						lo, hi = min(lo, i), i+1
					}
				}
				if lo == hi {
					lo = n - rng.IntN(n+1)
					hi = lo
				}
				lo, hi = lo-rng.IntN(lo+1), hi+rng.IntN(n-hi+1)
			}
			rec, lits := coder.appendCoded(nil, nil, msg, depth, lo, hi)

			ref := 0
			for j := min(depth, len(past)); j >= 1; j-- {
				if len(past[len(past)-j]) == n {
					ref = j
					break
				}
			}
			want := appendKey(nil, keyPatch)
			want = append(want, byte(ref))
			want = appendKey(want, keyMsg)
			if ref == 0 {
				want = msgp.AppendBytes(want, msg)
			}
			var wantLits []byte
			if ref > 0 { // always bin 32: its length is filled in after the patch
				var runs []byte
				runs, wantLits, _ = appendPatchBytewise(msg, past[len(past)-ref])
				want = binary.BigEndian.AppendUint32(append(want, 0xc6), uint32(len(runs)))
				want = append(want, runs...)
			}
			if !bytes.Equal(rec, want) || !bytes.Equal(lits, wantLits) {
				t.Fatalf("depth %d message %d (%d bytes, ref %d): coded\n%x\n%x\nwant\n%x\n%x", depth, rep, n, ref, rec, lits, want, wantLits)
			}
			m, _, err := msgp.ReadBytesZC(rec[5:])
			if err != nil {
				t.Fatal(err)
			}
			got, err := reader.decode(m, ref, depth, &lits)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, msg) || len(lits) != 0 {
				t.Fatalf("depth %d message %d decodes to %x, want %x (%d literals left)", depth, rep, got, msg, len(lits))
			}
			past = append(past, msg)
		}
	}
}

// TestAppendKey: every record key is coded as msgp.AppendString codes it.
func TestAppendKey(t *testing.T) {
	for _, key := range []string{keyKind, keyTime, keyConn, keyWall, keyLevel, keyVersion, keyPID, keyURL,
		keyMsg, keyPatch, keyLen, keyCuts, keyDigests, keyBy, keyCode, keyReason, keyErr, keyDropped,
		keyCause, keyCount, keyBytes} {
		if got, want := appendKey(nil, key), msgp.AppendString(nil, key); !bytes.Equal(got, want) {
			t.Fatalf("key %q coded %x, want %x", key, got, want)
		}
	}
}
