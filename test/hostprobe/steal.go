package hostprobe

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTick is USER_HZ, the unit of /proc/stat's times: 100 on every
// Linux architecture Go runs on.
const clockTick = 100

// StealMs reads /proc/stat's steal time of each CPU (the time the
// hypervisor ran something else while the vCPU had work), in ms, in
// steps of 10 ms.
func StealMs() (map[int]float64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[int]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// cpuN user nice system idle iowait irq softirq steal ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 9 || !strings.HasPrefix(fs[0], "cpu") || fs[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(fs[0][3:])
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(fs[8], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/stat: %s: steal %q: %v", fs[0], fs[8], err)
		}
		out[cpu] = float64(v) * 1000 / clockTick
	}
	return out, sc.Err()
}
