# lib.sh: the helpers /xvs/run.sh calls, laid over the cached image for each
# run. Every report goes to the second serial port (ttyS1), apart from the
# kernel console (ttyS0), so kernel messages never interleave with them; each
# line is "XVS-<KIND> key=value ...", parsed by test/qemu/results.go.
exec 3>/dev/ttyS1

res() { echo "XVS-$*" >&3; }
up() { cut -d' ' -f1 /proc/uptime; }
okrc() { if [ "$1" = 0 ]; then echo 1; else echo 0; fi; }

# out NAME FILE: a command's output, line by line, tagged with its name.
out() {
	local l
	while IFS= read -r l || [ -n "$l" ]; do echo "XVS-OUT $1 $l" >&3; done <"$2"
}

# inns NS CMD...: run CMD in the guest namespace NS ("" is the root one).
inns() {
	local n=$1
	shift
	if [ -z "$n" ]; then
		"$@"
	else
		nsenter -t "$(cat /tmp/ns/$n)" -n "$@"
	fi
}

# ns_make NAME: a network namespace held by a sleeping process. busybox has
# no `ip netns`, but it has unshare and nsenter, and `ip link set DEV netns
# PID` moves a NIC into the namespace of a process.
mkdir -p /tmp/ns
ns_make() {
	[ -f /tmp/ns/$1 ] && return 0
	unshare -n sleep 100000 </dev/null >/dev/null 2>&1 &
	local p=$! root i=0
	root=$(readlink /proc/1/ns/net)
	# $! is the child before it has unshared: wait until it has.
	while [ "$(readlink /proc/$p/ns/net)" = "$root" ]; do
		i=$((i + 1))
		[ $i -gt 1000 ] && return 1
		usleep 10000
	done
	echo $p >/tmp/ns/$1
	inns $1 ip link set lo up
	inns $1 sysctl -qw net.ipv6.conf.default.disable_ipv6=1
}

# nic IDX MAC ADDR NS WAIT IPV6 [IP MAC]...: find the NIC with MAC, report
# its negotiated virtio features (before it leaves the root namespace, whose
# sysfs is the only one mounted), move it to NS, give it ADDR, add static ARP
# entries (busybox `ip neigh` cannot add: arp -s), and wait up to WAIT
# seconds for carrier.
nic() {
	local idx=$1 mac=$2 addr=$3 ns=$4 wait=$5 v6=$6 d ifn="" feat mtu c=0 i=0
	shift 6
	for d in /sys/class/net/*; do
		[ "$(cat $d/address)" = "$mac" ] && ifn=${d##*/}
	done
	if [ -z "$ifn" ]; then
		res "NIC idx=$idx ok=0 mac=$mac detail=no interface has this MAC"
		return
	fi
	feat=$(cat /sys/class/net/$ifn/device/features 2>/dev/null)
	mtu=$(cat /sys/class/net/$ifn/mtu)
	if [ -n "$ns" ]; then
		ns_make "$ns" || res "NIC idx=$idx ok=0 detail=cannot create namespace $ns"
		ip link set "$ifn" netns "$(cat /tmp/ns/$ns)"
	fi
	[ "$v6" = 1 ] || inns "$ns" sysctl -qw net.ipv6.conf.$ifn.disable_ipv6=1
	inns "$ns" ip link set "$ifn" up
	[ -n "$addr" ] && inns "$ns" ip addr add "$addr" dev "$ifn"
	while [ $# -ge 2 ]; do
		inns "$ns" arp -i "$ifn" -s "$1" "$2"
		shift 2
	done
	while [ $i -lt $((wait * 20)) ]; do
		if inns "$ns" ip link show "$ifn" | grep -q LOWER_UP; then
			c=1
			break
		fi
		i=$((i + 1))
		usleep 50000
	done
	res "NIC idx=$idx ok=1 ifname=$ifn mac=$mac mtu=$mtu carrier=$c ns=$ns features=$feat"
}

# run NAME NS TIMEOUT CMD...: run CMD in NS, report its output and exit code.
run() {
	local name=$1 ns=$2 t=$3 t0 rc
	shift 3
	t0=$(up)
	inns "$ns" timeout "$t" "$@" >/tmp/out.$name 2>&1
	rc=$?
	out "$name" /tmp/out.$name
	res "RESULT name=$name ok=$(okrc $rc) rc=$rc start=$t0 end=$(up)"
}

# wait_listen NS PORT: until something listens on TCP PORT in NS (or 10 s).
wait_listen() {
	local i=0
	while ! inns "$1" netstat -ltn | grep -q ":$2 "; do
		i=$((i + 1))
		[ $i -gt 200 ] && return 1
		usleep 50000
	done
}

# nc_listen NAME NS PORT TIMEOUT: background server writing what arrives to
# /tmp/rx.NAME. Its stdin is a FIFO it holds open itself: busybox nc shuts
# the connection's write side when stdin ends, and the peer then stops early.
nc_listen() {
	mkfifo /tmp/hold.$1
	inns "$2" timeout "$4" nc -l -p "$3" <>/tmp/hold.$1 >/tmp/rx.$1 2>/tmp/err.$1 &
}

# payload NAME BYTES: random bytes in /tmp/tx.NAME; prints their sha256.
payload() {
	head -c "$2" /dev/urandom >/tmp/tx.$1
	sha256sum </tmp/tx.$1 | cut -d' ' -f1
}

# tcp NAME SRVNS SRVADDR CLINS PORT BYTES TIMEOUT: both ends in the guest.
tcp() {
	local name=$1 sns=$2 saddr=$3 cns=$4 port=$5 bytes=$6 t=$7 tx rx rxb crc src t0 ok=0
	t0=$(up)
	tx=$(payload "$name" "$bytes")
	nc_listen "$name" "$sns" "$port" "$t"
	local spid=$!
	wait_listen "$sns" "$port"
	inns "$cns" timeout "$t" nc "$saddr" "$port" </tmp/tx.$name >/tmp/out.$name 2>&1
	crc=$?
	wait $spid
	src=$?
	cat /tmp/err.$name >>/tmp/out.$name
	out "$name" /tmp/out.$name
	rx=$(sha256sum </tmp/rx.$name | cut -d' ' -f1)
	rxb=$(wc -c </tmp/rx.$name)
	[ $crc = 0 ] && [ $src = 0 ] && [ "$rx" = "$tx" ] && [ "$rxb" = "$bytes" ] && ok=1
	res "RESULT name=$name ok=$ok rc=$crc server_rc=$src bytes=$rxb sha256=$rx sent_bytes=$bytes sent_sha256=$tx start=$t0 end=$(up)"
}

# tcp_recv NAME NS PORT BYTES TIMEOUT: listen for a peer outside the guest;
# READY says when. BYTES > 0 is how many must arrive.
tcp_recv() {
	local name=$1 ns=$2 port=$3 bytes=$4 t=$5 rx rxb src t0 ok=0
	t0=$(up)
	nc_listen "$name" "$ns" "$port" "$t"
	local spid=$!
	wait_listen "$ns" "$port"
	res "READY name=$name port=$port"
	wait $spid
	src=$?
	out "$name" /tmp/err.$name
	rx=$(sha256sum </tmp/rx.$name | cut -d' ' -f1)
	rxb=$(wc -c </tmp/rx.$name)
	[ $src = 0 ] && [ "$rxb" -gt 0 ] && ok=1
	[ "$bytes" -gt 0 ] && [ "$rxb" != "$bytes" ] && ok=0
	res "RESULT name=$name ok=$ok server_rc=$src bytes=$rxb sha256=$rx start=$t0 end=$(up)"
}

# tcp_send NAME NS TARGET PORT BYTES TIMEOUT: send to a peer outside the
# guest, retrying the connection until the peer listens or TIMEOUT passes.
tcp_send() {
	local name=$1 ns=$2 target=$3 port=$4 bytes=$5 t=$6 tx crc=1 t0 end
	t0=$(up)
	tx=$(payload "$name" "$bytes")
	end=$(($(cut -d. -f1 /proc/uptime) + t))
	while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
		inns "$ns" timeout "$t" nc -w 2 "$target" "$port" </tmp/tx.$name >/tmp/out.$name 2>&1
		crc=$?
		[ $crc = 0 ] && break
		usleep 300000
	done
	out "$name" /tmp/out.$name
	res "RESULT name=$name ok=$(okrc $crc) rc=$crc sent_bytes=$bytes sent_sha256=$tx start=$t0 end=$(up)"
}
