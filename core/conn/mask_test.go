package conn

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws/wsutil"
	"github.com/plugrl/libplugrl/core/wire"
)

// TestMaskAcrossBufferFills: a message larger than the write buffer goes
// out in pieces, and the mask must continue at the message's byte position
// in every piece, in each of the writer's three paths: a run of short
// segments cut by a full buffer, a long segment cut by one, and the run
// at the end. The server unmasks what it reads and must get the message's
// bytes. With a buffer whose size and header leave pieces at offsets that
// are multiples of 4, a wrong mask position still unmasks correctly, so
// the sizes here are not: a mutant restarting the mask at 0 for a run cut
// by a full buffer survived every other test.
func TestMaskAcrossBufferFills(t *testing.T) {
	for _, wbuf := range []int{minWBuf, 67, 301, 1021} {
		t.Run(fmt.Sprint(wbuf), func(t *testing.T) {
			got := make(chan []byte, 4)
			url := rawServer(t, func(c net.Conn, _ *http.Request) {
				defer close(got)
				for {
					p, err := wsutil.ReadClientBinary(c)
					if err != nil {
						return
					}
					got <- p
				}
			})
			c := dialT(t, Options{URL: url, WriteBufferSize: wbuf})
			rng := rand.New(rand.NewPCG(uint64(wbuf), 1))
			fill := func(n int) []byte {
				b := make([]byte, n)
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				return b
			}
			// Past smallMessage, so it is not masked in one pass; short
			// keys and arrays of 3 to 700 bytes between long ones, so
			// runs and long segments both straddle buffer fills.
			var m wire.Message
			const keys = 40
			m.Map(keys)
			for i := 0; i < keys; i++ {
				m.Str(fmt.Sprintf("key %d", i))
				n := []int{3, 700, 17, 255, 256, 301}[i%6]
				if err := m.Array(&wire.Array{DType: wire.Uint8, Shape: []int{n}, Data: fill(n)}); err != nil {
					t.Fatal(err)
				}
			}
			m.Finish()
			if m.Len() <= smallMessage {
				t.Fatalf("a %d-byte message takes the small-message path; this test needs more", m.Len())
			}
			want := m.AppendTo(nil)
			for i := 0; i < 2; i++ { // the second with the buffer as the first left it
				if err := c.WriteMessage(&m); err != nil {
					t.Fatal(err)
				}
				select {
				case p := <-got:
					if !bytes.Equal(p, want) {
						at := 0
						for at < len(p) && at < len(want) && p[at] == want[at] {
							at++
						}
						t.Fatalf("message %d: the server read %d bytes differing from the %d sent at byte %d", i, len(p), len(want), at)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the server read no message") // a hang, not a timing assertion
				}
			}
		})
	}
}
