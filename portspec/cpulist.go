package portspec

import (
	"fmt"
	"strconv"
	"strings"
)

// errCPUList says what a CPU list looks like.
var errCPUList = fmt.Errorf("%w: want CPU numbers and ascending ranges, such as 2-3 or 0,2,4", ErrBadCPUList)

// ParseCPUList parses a CPU list as the kernel writes them ("0,2-3") into
// CPU numbers, for pinning the poll workers.
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, errCPUList
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, errCPUList
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
