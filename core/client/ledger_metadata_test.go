package client_test

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
)

// notMetadata is what a broken server sends first instead of metadata.
var notMetadata = []byte("\x81\xa4oops\xa5not metadata")

// TestLedgerRecordsRefusedMetadata: a connection whose first message the
// client refuses as not metadata (SPEC 5.1) is in the ledger, with the
// message as it was received and the connection's end: a connect record
// and a close record, as for every other connection, so that the audit's
// 5.1 rule ("the server's first message is not metadata") sees it. It
// left no record at all, neither in a reconnect (the attempt was only
// logged, and the ledger went from the reconnect record to the next good
// connection) nor in the first Connect (a close record with no connection
// and without the message).
func TestLedgerRecordsRefusedMetadata(t *testing.T) {
	good := metaBytes(wire.Metadata{ActionHorizon: wire.Opt[int64]{Value: 1, Set: true}, ActionDim: wire.Opt[int64]{Value: 1, Set: true}})
	serve := func(bad map[int]bool) string {
		_, url := rawServerLn(t, func(k int, nc net.Conn) {
			if bad[k] {
				_ = wsutil.WriteServerBinary(nc, notMetadata)
				_, _ = wsutil.ReadClientBinary(nc) // until the client goes
				return
			}
			_ = wsutil.WriteServerBinary(nc, good)
			for {
				msg, err := wsutil.ReadClientBinary(nc)
				if err != nil {
					return
				}
				in, err := wire.DecodeInfer(msg)
				if err != nil { // the feedback: resync, and the client reconnects
					_ = ws.WriteFrame(nc, ws.NewCloseFrame(ws.NewCloseFrameBody(1001, client.ReasonResync)))
					return
				}
				var m wire.Message
				chunk := wire.Array{DType: wire.Float32, Shape: []int{1, len(in.EnvIndices), 1}, Data: make([]byte, 4*len(in.EnvIndices))}
				_ = wire.EncodeAction(&m, in.EnvIndices, &chunk)
				_ = wsutil.WriteServerBinary(nc, m.AppendTo(nil))
			}
		})
		return url
	}
	check := func(t *testing.T, path string, wantConnects int) {
		t.Helper()
		var connects, closes, refused int
		walkLedger(t, path, func(_ *ledger.Reader, rec *ledger.Record) {
			switch rec.Kind {
			case ledger.KindConnect:
				connects++
				if bytes.Equal(rec.Msg, notMetadata) {
					refused++
				}
			case ledger.KindClose:
				closes++
			}
		})
		if connects != wantConnects || closes != wantConnects || refused != 1 {
			t.Fatalf("%d connect records (%d of them with the message refused as metadata), %d close records; "+
				"want %d connections, each with its connect and close, one of them the refused one", connects, refused, closes, wantConnects)
		}
	}

	t.Run("reconnect", func(t *testing.T) {
		url := serve(map[int]bool{2: true})
		path := filepath.Join(t.TempDir(), "l")
		c := dial(t, url, func(o *client.Options) { o.LedgerPath = path; o.ReconnectTimeout = 5 * time.Second })
		w := newWorld()
		if _, err := w.infer(c); err != nil {
			t.Fatal(err)
		}
		if err := w.feedback(c); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the resync arrives
		if _, err := w.infer(c); client.KindOf(err) != client.KindReconnected {
			t.Fatalf("infer after the resync: %v; want a reconnect (through the connection refused)", err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		check(t, path, 3)
	})
	t.Run("connect", func(t *testing.T) {
		url := serve(map[int]bool{1: true})
		path := filepath.Join(t.TempDir(), "l")
		c, err := client.New(client.Options{URL: url, LedgerPath: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Connect(context.Background()); client.KindOf(err) != client.KindProtocol {
			t.Fatalf("Connect: %v; want a protocol error", err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		check(t, path, 1)
	})
}
