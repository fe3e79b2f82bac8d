package ledger

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCPUs(t *testing.T) {
	for list, want := range map[string][]int{
		"3":         {3},
		"2-3,6":     {2, 3, 6},
		" 0 , 2-2 ": {0, 2},
		"1,1,0-1":   {1, 0},
		"1023":      {1023},
	} {
		got, err := ParseCPUs(list)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v", list, got, err, want)
		}
	}
	for list, says := range map[string]string{
		"":       "empty",
		"x":      "not a CPU number",
		"-1":     "not a CPU number",
		"3-1":    "backwards",
		"1-":     "not a CPU number",
		"1,,2":   "not a CPU number",
		"1024":   "past the last CPU",
		"0-2000": "past the last CPU",
	} {
		if _, err := ParseCPUs(list); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseCPUs(%q) = %v; want an error saying %q", list, err, says)
		}
	}
}
