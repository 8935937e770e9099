package main

import "testing"

// perfFlat is the shape of `perf report --stdio --no-children --sort
// symbol -n -g none` (perf 6.1).
const perfFlat = `# To display the perf.data header info, please use --header/--header-only options.
#
#
# Total Lost Samples: 0
#
# Samples: 5K of event 'cpu-clock:pppH'
# Event count (approx.): 1998000000
#
# Overhead       Samples  Symbol
# ........  ............  ..........................................
#
    25.60%          1536  [.] runtime.memmove                                      -      -            
    11.80%           708  [.] github.com/xvswitch/xvswitch/packed.(*Ring).popOne  -      -            
     6.10%           366  [k] entry_SYSCALL_64
     0.50%            30  [.] func with spaces


#
# (Tip: ...)
#
`

func TestParsePerfFlat(t *testing.T) {
	top, total := parsePerfFlat([]byte(perfFlat))
	if len(top) != 4 || total != 6000 {
		t.Fatalf("top %+v, total %d; want 4 functions, 6000 samples", top, total)
	}
	if top[0].Symbol != "runtime.memmove" || top[0].SelfPercent != 25.6 || top[0].Samples != 1536 ||
		top[1].Symbol != "github.com/xvswitch/xvswitch/packed.(*Ring).popOne" || top[3].Symbol != "func with spaces" {
		t.Errorf("top %+v", top)
	}
	if top, total := parsePerfFlat(nil); len(top) != 0 || total != 0 {
		t.Errorf("empty report: %v %d", top, total)
	}
}

func TestProfileName(t *testing.T) {
	if n := profileName(newCase(1, "", 64, "packed")); n != "profile-s1-packed-64.txt" {
		t.Errorf("%s", n)
	}
	if n := profileName(newCase(3, "bridge", 1518, "split")); n != "profile-s3-bridge-split-1518.txt" {
		t.Errorf("%s", n)
	}
	if !profiled(3) || profiled(4) || !profiled(5) || profiled(6) {
		t.Errorf("profiled scenarios: 1-3 and 5")
	}
}
