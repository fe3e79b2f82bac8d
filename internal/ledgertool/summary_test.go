package ledgertool_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/plugrl/libplugrl/core/ledger"
	"github.com/plugrl/libplugrl/core/wire"
	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// TestWriterCPUShown: summary prints the background writer's CPU time from
// the end record, per exchange, and dump shows it; a ledger without it
// (off Linux) gets neither line.
func TestWriterCPUShown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		for k := 0; k < 100; k++ {
			w.Received(make([]byte, 300)) // a recv record is an exchange to summary
		}
		time.Sleep(time.Millisecond) // background flushes take them
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := ledgertool.NewSummary()
	var dumped bytes.Buffer
	d := ledgertool.NewDumper(&dumped, false)
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error {
		s.Add(ev)
		return d.Add(ev)
	}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Print(&out)
	measured := runtime.GOOS == "linux"
	if got := strings.Contains(out.String(), "recording: the background writer's flushes used"); got != measured {
		t.Errorf("summary has the writer's CPU line: %v, want %v:\n%s", got, measured, out.String())
	}
	if got := strings.Contains(dumped.String(), `"writer_cpu_ns":`); got != measured {
		t.Errorf("dump has writer_cpu_ns: %v, want %v", got, measured)
	}
	if s.Exchanges != 5000 || (measured && (s.WriterCPU <= 0 || s.WriterCPU > s.Duration)) {
		t.Errorf("%d exchanges, writer CPU %v over %v; want 5000, and more than 0 and at most the ledger's time", s.Exchanges, s.WriterCPU, s.Duration)
	}
}

// TestSummaryEpisodes: the episode lines' arithmetic: the returns' mean,
// min and max (all positive here, so a min that started from zero would
// show), the lengths' mean, and the last ten episodes, in order.
func TestSummaryEpisodes(t *testing.T) {
	s := ledgertool.NewSummary()
	for i := 0; i < 15; i++ {
		s.AddEpisode(ledgertool.EpisodeRow{Slot: 1, Episode: int64(i), Return: float64(10 + i), Length: int64(i + 1)})
	}
	if s.Episodes != 15 || s.ReturnSum != 255 || s.ReturnMin != 10 || s.ReturnMax != 24 || s.LengthSum != 120 {
		t.Errorf("%d episodes, returns sum %v min %v max %v, lengths sum %v; want 15, 255, 10, 24, 120",
			s.Episodes, s.ReturnSum, s.ReturnMin, s.ReturnMax, s.LengthSum)
	}
	var last []int64
	for _, e := range s.LastEpisodes {
		last = append(last, e.Episode)
	}
	if fmt.Sprint(last) != "[5 6 7 8 9 10 11 12 13 14]" {
		t.Errorf("last episodes %v, want 5 to 14", last)
	}
	var out bytes.Buffer
	s.Print(&out)
	if want := "return: mean 17  min 10  max 24; length: mean 8\n"; !strings.Contains(out.String(), want) {
		t.Errorf("summary:\n%s\nwant a line with %q", out.String(), want)
	}
}

// TestSummaryLatencyPairs: a latency is an infer's time to the next
// action, one per infer: an action with no infer before it since the last
// action (a second reply, or one after a reconnect) adds none.
func TestSummaryLatencyPairs(t *testing.T) {
	s := ledgertool.NewSummary()
	for _, ev := range []*ledgertool.Event{
		{Record: &ledger.Record{Kind: ledger.KindSend, Time: 100}, Infer: &wire.InferMsg{}},
		{Record: &ledger.Record{Kind: ledger.KindRecv, Time: 150}},
		{Record: &ledger.Record{Kind: ledger.KindRecv, Time: 5000}},
	} {
		s.Add(ev)
	}
	var out bytes.Buffer
	s.Print(&out)
	if want := "max 50ns  (n=1)"; !strings.Contains(out.String(), want) {
		t.Errorf("summary:\n%s\nwant a latency line ending %q", out.String(), want)
	}
}

// TestSummaryServers: the addresses the connections went to, each with
// its count, in the order first seen, at most 16 listed (a ledger's file
// says how many there are); a connect record without one (a ledger of an
// earlier library) lists nothing.
func TestSummaryServers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	w, err := ledger.Create(path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Connected("ws://trainer.local:8765", "", []byte{0x80})
	for _, a := range []string{"10.0.0.5:8765", "192.168.1.10:8765", "10.0.0.5:8765"} {
		w.Connected("ws://trainer.local:8765", a, []byte{0x80})
	}
	for i := 0; i < 20; i++ {
		w.Connected("ws://trainer.local:8765", fmt.Sprintf("10.1.0.%d:8765", i), []byte{0x80})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := ledgertool.NewSummary()
	if _, err := ledgertool.Walk(path, func(ev *ledgertool.Event) error { s.Add(ev); return nil }); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Print(&out)
	want := "server addresses: 10.0.0.5:8765 (2 connections), 192.168.1.10:8765 (1 connection), 10.1.0.0:8765 (1 connection)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, out.String())
	}
	if !strings.Contains(out.String(), "10.1.0.13:8765 (1 connection), and 6 connections to other addresses\n") {
		t.Errorf("summary does not stop at 16 addresses:\n%s", out.String())
	}
	if s.Connections != 24 {
		t.Errorf("%d connections; want 24", s.Connections)
	}
}
