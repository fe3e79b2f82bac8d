package conn

import (
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/plugrl/libplugrl/core/wire"
)

// fakeTr is a transport that sends nowhere and always has the same frame
// to read: the benchmark measures the connection's and the encoder's own
// work for one exchange, without system calls.
type fakeTr struct{ frame []byte }

func (f *fakeTr) Read(p []byte) (int, error)        { return copy(p, f.frame), nil }
func (f *fakeTr) TryRead(p []byte) (int, error)     { return 0, nil }
func (f *fakeTr) Write(p []byte) (int, error)       { return len(p), nil }
func (f *fakeTr) TryWrite(p []byte) (int, error)    { return len(p), nil }
func (f *fakeTr) BeginWrite(time.Duration)          {}
func (f *fakeTr) Holds() bool                       { return false }
func (f *fakeTr) NeverWaits() bool                  { return true }
func (f *fakeTr) SetReadDeadline(t time.Time) error { return nil }
func (f *fakeTr) Shutdown()                         {}
func (f *fakeTr) Close() error                      { return nil }

// BenchmarkFakeExchangeSmall: the SMALL exchange of ./build.sh bench (1
// env, state 8, text) through EncodeInfer, WriteMessage, Receive,
// Action.Decode, EncodeFeedback, Poll and WriteMessage.
func BenchmarkFakeExchangeSmall(b *testing.B) {
	var obs wire.Observation
	obs.States = []wire.NamedArray{{Name: "state", Array: wire.Array{DType: wire.Float64, Shape: []int{1, 8}, Data: make([]byte, 64)}}}
	obs.Text = []string{"pick up the red block"}
	idx, z, fl := []int64{0}, []int64{0}, []bool{false}
	in := &wire.Infer{EnvIndices: idx, StepIDs: z, Obs: &obs}
	fb := &wire.Feedback{EnvIndices: idx, StepIDs: z, Obs: &obs, Rewards: make([]float32, 1), Terminated: fl, Truncated: fl}
	var am wire.Message
	_ = wire.EncodeAction(&am, idx, &wire.Array{DType: wire.Float32, Shape: []int{8, 1, 7}, Data: make([]byte, 4*56)})
	payload := am.AppendTo(nil)
	hdr := make([]byte, 14)
	n := putHeader(hdr, ws.Header{Fin: true, OpCode: ws.OpBinary, Length: int64(len(payload))})
	tr := &fakeTr{frame: append(hdr[:n], payload...)}
	c := newConn(tr, Options{})
	var mi, mf wire.Message
	var act wire.Action
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = wire.EncodeInfer(&mi, in)
		_ = c.WriteMessage(&mi)
		raw, err := c.Receive(time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := act.Decode(raw); err != nil {
			b.Fatal(err)
		}
		_ = wire.EncodeFeedback(&mf, fb)
		c.Poll()
		_ = c.WriteMessage(&mf)
	}
}
