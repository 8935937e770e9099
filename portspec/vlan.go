package portspec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// VLANs are a port's 802.1Q settings, OVS's tag and trunks:
//
//   - neither (the zero value): the port carries every VLAN as it comes,
//     tagged frames in their VLAN, untagged ones in VLAN 0 (OVS's default
//     trunk of all VLANs);
//   - vlan=N alone: an access port in VLAN N; its frames are untagged on
//     the port's side and in VLAN N inside the switch; a tagged frame
//     arriving on it is dropped;
//   - trunk=N+M+...: only those VLANs, tagged on the port's side; an
//     untagged frame arriving on it is dropped, unless vlan=N is given too:
//     then N is the trunk's native VLAN, untagged on the port's side.
//
// `+` separates the trunk's VLANs because `,` separates port options.
type VLANs struct {
	Tag    int   `json:"vlan,omitempty"`  // vlan=N, 1..4094; 0: none
	Trunks []int `json:"trunk,omitempty"` // trunk=N+M+..., sorted, no duplicates
}

// MaxVLAN is the highest VLAN id a port may name (4095 is reserved).
const MaxVLAN = 4094

// IsSet is whether the port has any VLAN settings.
func (v VLANs) IsSet() bool { return v.Tag != 0 || len(v.Trunks) != 0 }

// String is the settings as a spec writes them ("vlan=10,trunk=20+30"),
// empty for none.
func (v VLANs) String() string {
	var parts []string
	if v.Tag != 0 {
		parts = append(parts, "vlan="+strconv.Itoa(v.Tag))
	}
	if len(v.Trunks) != 0 {
		ids := make([]string, len(v.Trunks))
		for i, id := range v.Trunks {
			ids[i] = strconv.Itoa(id)
		}
		parts = append(parts, "trunk="+strings.Join(ids, "+"))
	}
	return strings.Join(parts, ",")
}

// parseVLANOption handles vlan= and trunk= for any port kind; ok is false
// for any other option.
func parseVLANOption(k, val string, v *VLANs) (ok bool, err error) {
	switch k {
	case "vlan":
		v.Tag, err = vlanID(k, val)
		return true, err
	case "trunk":
		seen := map[int]bool{}
		v.Trunks = v.Trunks[:0]
		for _, f := range strings.Split(val, "+") {
			id, err := vlanID(k, f)
			if err != nil {
				return true, err
			}
			if seen[id] {
				return true, fmt.Errorf("%w: trunk=%q: VLAN %d given twice", ErrBadSpec, val, id)
			}
			seen[id] = true
			v.Trunks = append(v.Trunks, id)
		}
		sort.Ints(v.Trunks)
		return true, nil
	}
	return false, nil
}

func vlanID(k, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxVLAN {
		return 0, fmt.Errorf("%w: %s=%q: want VLAN ids 1..%d", ErrBadSpec, k, s, MaxVLAN)
	}
	return n, nil
}
