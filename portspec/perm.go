package portspec

import (
	"errors"
	"os"
	"os/user"
	"strconv"
)

// A socket file's permissions and group, as --vhost's mode= and group=
// and run's --ctl-mode and --ctl-group give them.

// ParseMode reads octal permissions such as 0660.
func ParseMode(s string) (os.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m == 0 || m > 0o777 {
		return 0, errors.New("want octal permissions like 0660")
	}
	return os.FileMode(m), nil
}

// ParseGroup reads a group name or a numeric GID. A name is looked up
// with os/user, which in a static (CGO_ENABLED=0) build reads /etc/group
// only: a group that only NSS knows (LDAP, sssd) is given by its GID.
func ParseGroup(s string) (int, error) {
	if gid, err := strconv.Atoi(s); err == nil {
		return gid, nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}
