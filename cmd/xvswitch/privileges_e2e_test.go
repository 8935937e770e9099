package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"golang.org/x/sys/unix"
)

// sandbox plays examples/xvswitch.service without systemd, for one
// `xvswitch run`: in a private mount namespace, a bpffs mounted the way
// systemd mounts the host's (root's, mode 0700) whose xvswitch directory
// is given to the user (ExecStartPre=), an empty read-only tmpfs over
// /sys/fs/bpf with only that directory bound into it
// (TemporaryFileSystem=, BindPaths=), the memlock limit (LimitMEMLOCK=),
// then setpriv to the user with exactly the capabilities (User=, Group=,
// SupplementaryGroups=, CapabilityBoundingSet=, AmbientCapabilities=,
// NoNewPrivileges=). Nothing it mounts is seen outside the daemon.
type sandbox struct {
	uid, gid int
	groups   []int    // supplementary groups
	caps     []string // "CAP_NET_ADMIN", ...
	memlock  string   // `ulimit -l` argument; "" leaves the limit alone
	hostBPF  string   // where the "host's" bpffs is mounted, in the namespace
	pinOwner int      // who gets the pin directory: uid, as the unit does
	noBPFFS  bool     // no bpffs at all at /sys/fs/bpf (the unit never does this)
}

func (s sandbox) command(bin string, args ...string) *exec.Cmd {
	script := `set -e
mount -t bpf -o mode=0700 bpf "$1"
install -d -o "$2" -g "$2" -m 0700 "$1/xvswitch"
mount -t tmpfs -o mode=0755 tmpfs /sys/fs/bpf
mkdir /sys/fs/bpf/xvswitch
mount --bind "$1/xvswitch" /sys/fs/bpf/xvswitch
mount -o remount,ro /sys/fs/bpf
`
	if s.noBPFFS {
		script = "umount -l /sys/fs/bpf 2>/dev/null || true\n"
	}
	if s.memlock != "" {
		script += "ulimit -l " + s.memlock + "\n"
	}
	script += `shift 2
exec "$@"
`
	caps := "-all"
	for _, c := range s.caps {
		caps += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	groups := "--clear-groups"
	if len(s.groups) > 0 {
		var g []string
		for _, id := range s.groups {
			g = append(g, fmt.Sprint(id))
		}
		groups = "--groups=" + strings.Join(g, ",")
	}
	argv := []string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", s.hostBPF, fmt.Sprint(s.pinOwner),
		"setpriv", "--reuid=" + fmt.Sprint(s.uid), "--regid=" + fmt.Sprint(s.gid), groups,
		"--inh-caps=" + caps, "--ambient-caps=" + caps, "--bounding-set=" + caps, "--no-new-privs", bin}
	return exec.Command("unshare", append(argv, args...)...)
}

// unusedID returns an id at or below from that lookup does not know.
func unusedID(t *testing.T, from int, lookup func(string) error) int {
	t.Helper()
	for id := from; id > from-1000; id-- {
		if lookup(fmt.Sprint(id)) != nil {
			return id
		}
	}
	t.Fatalf("no unused id below %d", from)
	return 0
}

func lookupUser(id string) error  { _, err := user.LookupId(id); return err }
func lookupGroup(id string) error { _, err := user.LookupGroupId(id); return err }

// The frames the test sends carry this EtherType (IEEE local experimental),
// so the namespace's packet socket sees only them.
const testEtherType = 0x88b5

func etherFrame(dst, src net.HardwareAddr, payload string) []byte {
	f := make([]byte, 60)
	copy(f, dst)
	copy(f[6:], src)
	f[12], f[13] = testEtherType>>8, testEtherType&0xff
	copy(f[14:], payload)
	return f
}

// packetSocket opens an AF_PACKET socket for testEtherType on ifname in
// ns, closed when the test ends.
func packetSocket(t *testing.T, ns *netns.Namespace, ifname string) int {
	t.Helper()
	proto := int(testEtherType>>8 | testEtherType&0xff<<8) // network byte order
	fd := -1
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index})
	}); err != nil {
		t.Fatalf("packet socket on %s: %v", ifname, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

// TestLeastPrivilege runs the daemon the way examples/xvswitch.service
// does: an unprivileged user with only the unit's capabilities. It
// bridges two veth NICs and a vhost port served to an in-process
// front-end, and frames cross every way; then each capability, the
// memlock limit, the pin directory and the socket group are taken away in
// turn, and the start fails with the error docs/privileges.md quotes.
func TestLeastPrivilege(t *testing.T) {
	require.Root(t)
	require.Commands(t, "setpriv", "unshare", "mount", "umount", "install", "ping")
	caps := unitSetting(t, "AmbientCapabilities")
	bin := buildXvswitch(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil { // reachable by the user
		t.Fatal(err)
	}
	uid := unusedID(t, 64990, lookupUser)
	gid := unusedID(t, 64990, lookupGroup)
	sockGID := unusedID(t, gid-1, lookupGroup) // a group like kvm, for the vhost socket
	// RuntimeDirectory=: the control and vhost sockets' directory, the user's.
	run, err := os.MkdirTemp("", "xvs-priv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	if err := os.Chown(run, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run, 0o755); err != nil {
		t.Fatal(err)
	}
	base := sandbox{uid: uid, gid: gid, groups: []int{sockGID}, caps: caps, memlock: "unlimited", hostBPF: t.TempDir(), pinOwner: uid}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		t.Fatal(err)
	}
	if eff, _ := effectiveCaps(); rl.Max != unix.RLIM_INFINITY && eff&(1<<unix.CAP_SYS_RESOURCE) == 0 {
		// Systemd raises the limit as PID 1; here nobody can.
		t.Logf("the hard RLIMIT_MEMLOCK is %d KiB and this process lacks CAP_SYS_RESOURCE: CAP_IPC_LOCK stands in for LimitMEMLOCK=infinity", rl.Max/1024)
		base.memlock, base.caps = "", append(caps[:len(caps):len(caps)], "CAP_IPC_LOCK")
	}

	v1 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.97.0.1/24"})
	v2 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.97.0.2/24"})
	t.Run("forwards", func(t *testing.T) {
		const vmMAC = "02:00:00:97:00:10"
		sock, ctlSock := filepath.Join(run, "vm.sock"), filepath.Join(run, "ctl.sock")
		metrics := freeTCPAddr(t)
		d := launchDaemon(t, ctlSock, base.command(bin, "run", "--ctl", ctlSock, "--workers", "1", "--cpus", "0", "--metrics", metrics,
			"--nic", v1.Outer+",mode=copy,name=nic1", "--nic", v2.Outer+",mode=copy,name=nic2",
			"--vhost", fmt.Sprintf("%s,name=vm,mac=%s,mode=0660,group=%d", sock, vmMAC, sockGID)))
		checkIdentity(t, d.cmd.Process.Pid, uid, base.caps)
		checkOwned(t, sock, uid, sockGID, 0o660)
		checkOwned(t, fmt.Sprintf("/proc/%d/root%s/%s/xsks", d.cmd.Process.Pid, "/sys/fs/bpf/xvswitch", v1.Outer), uid, gid, 0o600)

		// NIC <-> NIC: the namespaces ping each other through the bridge.
		out, err := v1.NS.Exec("ping", "-c", "5", "-i", "0.2", "-W", "2", "10.97.0.2").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "5 received") && !strings.Contains(string(out), "4 received") {
			t.Fatalf("ping across the switch: %v\n%s", err, out)
		}

		// NIC <-> VM, the VM played by a vhost-user front-end in this process.
		fe := vhosttest.Dial(t, sock)
		fe.Start(vhosttest.Options{})
		fe.PostRx(0, 64)
		pkt := packetSocket(t, v1.NS, v1.Inner)
		vm, _ := net.ParseMAC(vmMAC)
		inner, _ := net.ParseMAC(netns.MAC(t, v1.NS, v1.Inner))
		const toVM, fromVM = "least privilege: NIC to VM", "least privilege: VM to NIC"
		if _, err := unix.Write(pkt, etherFrame(vm, inner, toVM)); err != nil {
			t.Fatal(err)
		}
		vhosttest.WaitFor(t, "the NIC's frame in the VM", func() bool {
			for _, r := range fe.Receive(0) {
				if bytes.Contains(r.Frame, []byte(toVM)) {
					return true
				}
			}
			return false
		})
		if fe.Send(0, etherFrame(inner, vm, fromVM)) != 1 {
			t.Fatal("the VM's TX ring is full")
		}
		buf := make([]byte, 2048)
		for deadline := time.Now().Add(5 * time.Second); ; {
			n, err := unix.Read(pkt, buf)
			if err == nil && bytes.Contains(buf[:n], []byte(fromVM)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the VM's frame never reached the namespace (last read: %v)", err)
			}
		}

		if body := httpGet(t, "http://"+metrics+"/metrics"); !strings.Contains(body, `xvswitch_rx_packets_total{port="vm"`) {
			t.Errorf("metrics lack the vm port:\n%s", body)
		}
		time.Sleep(300 * time.Millisecond) // the last bursts' counters
		st := d.stats(t)
		if p := port(st, "vm"); p.RxPackets < 1 || p.TxPackets < 1 {
			t.Errorf("vm port: %+v", p)
		}
		checkBalance(t, st)
		if strings.Contains(d.log.String(), "cannot pin to CPU") {
			t.Errorf("worker CPU pinning failed without CAP_SYS_NICE:\n%s", d.log)
		}
		if err := d.stop(t); err != nil {
			t.Errorf("xvswitch exited with %v", err)
		}
		if out, _ := exec.Command("ip", "link", "show", v1.Outer).CombinedOutput(); bytes.Contains(out, []byte("xdp")) {
			t.Errorf("XDP still attached after shutdown:\n%s", out)
		}
	})

	// What fails without each: the messages docs/privileges.md quotes.
	without := func(c string) sandbox {
		s := base
		s.caps = nil
		for _, k := range base.caps {
			if k != c {
				s.caps = append(s.caps, k)
			}
		}
		return s
	}
	nic := []string{"--nic", v1.Outer + ",mode=copy"}
	for _, c := range []struct {
		name string
		sb   sandbox
		args []string
		want []string
	}{
		{"CAP_NET_ADMIN", without("CAP_NET_ADMIN"), nic, []string{"map xsks: map create: operation not permitted", "lacks CAP_NET_ADMIN,"}},
		{"CAP_NET_RAW", without("CAP_NET_RAW"), nic, []string{"socket(AF_XDP): operation not permitted", "lacks CAP_NET_RAW,"}},
		{"CAP_BPF", without("CAP_BPF"), nic, []string{"map create: operation not permitted", "lacks CAP_BPF,"}},
		{"CAP_PERFMON", without("CAP_PERFMON"), nic, []string{"pointer arithmetic with it prohibited for !root", "lacks CAP_PERFMON,"}},
		{"memlock", func() sandbox { s := without("CAP_IPC_LOCK"); s.memlock = "1024"; return s }(), nic,
			[]string{"registering a UMEM of 12288 KiB", "RLIMIT_MEMLOCK, which is 1024 KiB", "CAP_IPC_LOCK"}},
		{"pin directory", func() sandbox { s := base; s.pinOwner = 0; return s }(), nic,
			[]string{"mkdir /sys/fs/bpf/xvswitch/" + v1.Outer + ": permission denied", "must belong to the user xvswitch runs as"}},
		{"bpffs", func() sandbox { s := base; s.noBPFFS = true; return s }(), nic,
			[]string{"mount bpffs at /sys/fs/bpf: operation not permitted", "mounting it needs CAP_SYS_ADMIN"}},
		{"socket group", func() sandbox { s := base; s.groups = nil; return s }(),
			[]string{"--vhost", fmt.Sprintf("%s/vm.sock,group=%d", run, sockGID)}, []string{"lchown", "operation not permitted"}},
	} {
		t.Run("without "+c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := c.sb.command(bin, append([]string{"run", "--ctl", filepath.Join(run, "ctl.sock")}, c.args...)...)
			out, err := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...).CombinedOutput()
			if err == nil {
				t.Fatalf("xvswitch ran and exited 0:\n%s", out)
			}
			for _, w := range c.want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("the error lacks %q:\n%s", w, lastLines(string(out), 6))
				}
			}
		})
	}
}

// checkIdentity: the daemon runs as uid with exactly caps, effective and
// bounding.
func checkIdentity(t *testing.T, pid, uid int, caps []string) {
	t.Helper()
	var want uint64
	for _, c := range caps {
		bit, ok := capBits[c]
		if !ok {
			t.Fatalf("unknown capability %s", c)
		}
		want |= 1 << bit
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	wantHex := fmt.Sprintf("%016x", want)
	for _, f := range []string{fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid), "CapEff:\t" + wantHex, "CapBnd:\t" + wantHex, "CapInh:\t" + wantHex} {
		if !bytes.Contains(b, []byte(f+"\n")) {
			t.Errorf("the daemon's status lacks %q:\n%s", f, b)
		}
	}
}

var capBits = map[string]uint{
	"CAP_NET_ADMIN": unix.CAP_NET_ADMIN, "CAP_NET_RAW": unix.CAP_NET_RAW, "CAP_BPF": unix.CAP_BPF,
	"CAP_PERFMON": unix.CAP_PERFMON, "CAP_IPC_LOCK": unix.CAP_IPC_LOCK,
}

// checkOwned: path belongs to uid:gid with permissions mode.
func checkOwned(t *testing.T, path string, uid, gid int, mode os.FileMode) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Uid) != uid || int(st.Gid) != gid || os.FileMode(st.Mode).Perm() != mode {
		t.Errorf("%s: owner %d:%d mode %o, want %d:%d %o", path, st.Uid, st.Gid, st.Mode&0o777, uid, gid, mode)
	}
}

// freeTCPAddr returns a loopback address whose port was free a moment ago.
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
