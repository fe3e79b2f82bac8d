package ledger

// HoldFlushes keeps w's background writer from taking the queue until
// release is called, so that a test decides what the queue holds.
func HoldFlushes(w *Writer) (release func()) {
	w.flushMu.Lock()
	return w.flushMu.Unlock
}

// flushNow flushes w now, between the flushes release holds back
// (HoldFlushes), and holds them back again: the fuzzers' flush op.
func flushNow(w *Writer, release func()) func() {
	release()
	w.flush()
	return HoldFlushes(w)
}

// EncoderOf is the zstd encoder w compresses with.
func EncoderOf(w *Writer) any { return w.enc }

// Incompressible is incompressible, for the external tests.
var Incompressible = incompressible

// incompressible fills a message that zstd cannot shrink, and that no
// earlier one patches (seed apart).
func incompressible(n int, seed uint64) []byte {
	b := make([]byte, n)
	x := 88172645463325252 + seed
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}
