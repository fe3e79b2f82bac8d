package client

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestKindsMatchHeader: every plugrl_status of include/plugrl.h is the
// Kind of the same value, under the C name the Kinds table gives it, and
// the table has no other entry. A status added to one and not the other
// fails here.
func TestKindsMatchHeader(t *testing.T) {
	h, err := os.ReadFile("../../include/plugrl.h")
	if err != nil {
		t.Fatal(err)
	}
	enum := regexp.MustCompile(`(?s)typedef enum plugrl_status \{(.*?)\} plugrl_status;`).FindSubmatch(h)
	if enum == nil {
		t.Fatal("no plugrl_status enum in plugrl.h")
	}
	seen := 0
	for _, m := range regexp.MustCompile(`(PLUGRL_[A-Z_]+) = (\d+)`).FindAllSubmatch(enum[1], -1) {
		v, _ := strconv.Atoi(string(m[2]))
		if v < 0 || v >= int(numKinds) {
			t.Errorf("%s = %d has no Kind", m[1], v)
			continue
		}
		if got := Kinds[v].C; got != string(m[1]) {
			t.Errorf("plugrl.h has %s = %d; Kind %d is %q", m[1], v, v, got)
		}
		seen++
	}
	if seen != int(numKinds) {
		t.Errorf("plugrl.h has %d statuses, the Kinds table %d", seen, numKinds)
	}
	for k := Kind(0); k < numKinds; k++ {
		if Kinds[k].Name == "" {
			t.Errorf("Kind %d has no name", k)
		}
	}
}
