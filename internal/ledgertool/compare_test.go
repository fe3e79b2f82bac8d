package ledgertool_test

import (
	"reflect"
	"testing"

	"github.com/plugrl/libplugrl/internal/ledgertool"
)

// TestCompareEpisodesFindsEachDifference: an episode only in the server's
// log, one only in the ledger, and one whose length differs are each a
// difference, reported once, in slot and episode order. Every other test
// of CompareEpisodes either wanted no difference at all or only NaN
// returns and repeated rows: with the "missing", "extra" or length check
// removed, `plugrl ledger compare` (tests/ledger.sh's check that a
// cartpole's ledger holds the server's episodes) still passed them all.
func TestCompareEpisodesFindsEachDifference(t *testing.T) {
	row := func(slot, ep int64, ret float64, length int64) ledgertool.EpisodeRow {
		return ledgertool.EpisodeRow{Step: 1, Slot: slot, Episode: ep, Return: ret, Length: length}
	}
	same := row(0, 0, 5, 5)
	onlyServer, onlyLedger := row(0, 1, 7, 7), row(1, 0, 3, 3)
	lenLedger, lenServer := row(2, 0, 4, 4), row(2, 0, 4, 6)   // the same return, another length
	retLedger, retServer := row(3, 0, 4, 4), row(3, 0, 4.5, 4) // the same length, another return
	got := ledgertool.CompareEpisodes(
		[]ledgertool.EpisodeRow{same, onlyLedger, lenLedger, retLedger},
		[]ledgertool.EpisodeRow{retServer, lenServer, onlyServer, same})
	want := []ledgertool.Difference{
		{What: "missing", Server: onlyServer},
		{What: "extra", Client: onlyLedger},
		{What: "differs", Client: lenLedger, Server: lenServer},
		{What: "differs", Client: retLedger, Server: retServer},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("differences\n  %+v\nwant\n  %+v", got, want)
	}
	if d := ledgertool.CompareEpisodes([]ledgertool.EpisodeRow{same}, []ledgertool.EpisodeRow{same}); len(d) != 0 {
		t.Fatalf("equal logs: differences %+v", d)
	}
}
