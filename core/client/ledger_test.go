package client_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/internal/hostile"
)

// ledgerKinds reads the ledger at path and lists its records' kinds.
func ledgerKinds(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ledger.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var kinds []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return kinds
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, rec.Kind)
	}
}

// TestLedgerRecordsAnInterruptedConnect: a Connect ended by Interrupt is
// an interrupt record, as every other call's is (it was only a close).
func TestLedgerRecordsAnInterruptedConnect(t *testing.T) {
	s := hostileServer(t, hostile.Config{Scenario: hostile.NoMetadata})
	path := filepath.Join(t.TempDir(), "l")
	c, err := client.New(client.Options{URL: s.URL(), LedgerPath: path, MetadataTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, c.Interrupt)
	if err := c.Connect(context.Background()); client.KindOf(err) != client.KindInterrupted {
		t.Fatalf("Connect: %v; want it interrupted", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	kinds := ledgerKinds(t, path)
	if i := slices.Index(kinds, ledger.KindInterrupt); i < 0 || i > slices.Index(kinds, ledger.KindClose) {
		t.Fatalf("records %v; want an interrupt before the close", kinds)
	}
}
