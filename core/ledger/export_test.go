package ledger

// HoldFlushes keeps w's background writer from taking the queue until
// release is called, so that a test decides what the queue holds.
func HoldFlushes(w *Writer) (release func()) {
	w.flushMu.Lock()
	return w.flushMu.Unlock
}

// EncoderOf is the zstd encoder w compresses with.
func EncoderOf(w *Writer) any { return w.enc }

// Incompressible is incompressible, for the external tests.
var Incompressible = incompressible
