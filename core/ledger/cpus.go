package ledger

import (
	"fmt"
	"strconv"
	"strings"
)

// maxCPU bounds the CPU numbers a writer can be given: the kernel's
// cpu_set_t (CPU_SETSIZE) holds 1024.
const maxCPU = 1024

// ParseCPUs reads a CPU list as taskset -c and the kernel's cpuset files
// write it: comma-separated CPU numbers and inclusive ranges, "3",
// "2-3,6". It returns the CPUs in the order given, without repeats.
func ParseCPUs(list string) ([]int, error) {
	if strings.TrimSpace(list) == "" {
		return nil, fmt.Errorf("the CPU list is empty; want CPU numbers and ranges, such as 3 or 2-3,6")
	}
	var cpus []int
	seen := map[int]bool{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		first, err := parseCPU(lo, item)
		if err != nil {
			return nil, err
		}
		last := first
		if isRange {
			if last, err = parseCPU(hi, item); err != nil {
				return nil, err
			}
			if last < first {
				return nil, fmt.Errorf("the CPU range %q runs backwards; want low-high, such as 2-3", item)
			}
		}
		for c := first; c <= last; c++ {
			if !seen[c] {
				seen[c] = true
				cpus = append(cpus, c)
			}
		}
	}
	return cpus, nil
}

func parseCPU(s, item string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q in the CPU list is not a CPU number or range; want such as 3 or 2-3,6", item)
	}
	if n >= maxCPU {
		return 0, fmt.Errorf("CPU %d in the CPU list %q is past the last CPU a thread can be given (%d)", n, item, maxCPU-1)
	}
	return n, nil
}

// FormatCPUs writes cpus as a CPU list ParseCPUs reads back to cpus,
// each run of consecutive CPUs as a range ("0-63", not 64 numbers: the
// list goes into log lines and errors).
func FormatCPUs(cpus []int) string {
	var s []string
	for i := 0; i < len(cpus); {
		j := i + 1
		for j < len(cpus) && cpus[j] == cpus[j-1]+1 {
			j++
		}
		if j-i == 1 {
			s = append(s, strconv.Itoa(cpus[i]))
		} else {
			s = append(s, strconv.Itoa(cpus[i])+"-"+strconv.Itoa(cpus[j-1]))
		}
		i = j
	}
	return strings.Join(s, ",")
}
