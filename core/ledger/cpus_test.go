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

// TestFormatCPUs: runs of CPUs are written as ranges, as taskset -c and
// the kernel's cpuset files write them: a writer refused a 64-core range
// was told so in a message of 64 numbers (1024 for 0-1023).
func TestFormatCPUs(t *testing.T) {
	for want, cpus := range map[string][]int{
		"":      nil,
		"3":     {3},
		"2-3,6": {2, 3, 6},
		"0-1023": func() []int {
			c := make([]int, 1024)
			for i := range c {
				c[i] = i
			}
			return c
		}(),
		"1,0":        {1, 0},
		"4-6,1,9-10": {4, 5, 6, 1, 9, 10},
	} {
		if got := FormatCPUs(cpus); got != want {
			t.Errorf("FormatCPUs(%v) = %q; want %q", cpus, got, want)
		}
		if want == "" {
			continue
		}
		if back, err := ParseCPUs(want); err != nil || !reflect.DeepEqual(back, cpus) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v", want, back, err, cpus)
		}
	}
}
