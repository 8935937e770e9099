//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * xvs_steer: the XDP program xvswitch attaches to every NIC it switches.
 *
 * It redirects to the AF_XDP socket of the frame's rx queue (the XSKMAP
 * `xsks`) only the frames the switch owns, and passes everything else to
 * the kernel, so the host keeps using the same NIC. What the switch owns is
 * the interface's policy in `config`: nothing, everything, or frames whose
 * destination MAC is one of the VMs' in the frame's VLAN (the hash map
 * `macs`, keyed by VLAN and MAC: the id of the frame's one 802.1Q tag, or
 * the interface's native VLAN for an untagged frame) plus, if asked,
 * broadcast and multicast. Group frames the host needs to stay reachable on
 * the NIC are the host's even then: in the MAC mode, an ARP packet or an
 * IPv6 Neighbor Solicitation whose target is one of the host's own
 * addresses (`host_v4`, `host_v6`) is passed to the kernel (XDP cannot
 * give one frame to both). Group frames the MAC policy does not steer are
 * passed and counted apart (group_passed): the switch takes its copies of
 * them from the kernel (an AF_PACKET socket), so host and VMs both get
 * them. Every frame is counted exactly once by verdict in the per-CPU
 * `counters`:
 *
 *   frames = redirected + no_socket_passed + bad_queue_passed
 *          + not_owned_passed + short_passed
 *          + host_arp_passed + host_nd_passed + group_passed
 *          + owned_queue_passed
 *
 * A queue a VM owns (`queue_owners`) has that VM's socket on its memory:
 * only frames to the VM's MAC are redirected there, never other unicast,
 * broadcast or multicast (owned_queue_passed).
 *
 * All names (program, maps, struct fields) are stable: the Go loader, the
 * pins under /sys/fs/bpf/xvswitch/<ifname>/ and bpftool dumps use them.
 */
#include "xvs_kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Slots of the XSKMAP: rx queues beyond it are never steered. */
#define XVS_MAX_QUEUES 256
/* VM MACs one interface can steer. */
#define XVS_MAX_MACS 4096
/* Host addresses per family one interface can protect. */
#define XVS_MAX_HOST_ADDRS 256

enum xvs_mode {
	XVS_MODE_NONE = 0, /* steer nothing: every frame to the kernel */
	XVS_MODE_ALL = 1,  /* steer every frame */
	XVS_MODE_MAC = 2,  /* steer frames to a MAC in `macs` (+ bcast/mcast if set) */
};

/* The interface's policy: entry 0 of `config`. */
struct xvs_config {
	enum xvs_mode mode;
	__u8 broadcast; /* MAC mode: steer ff:ff:ff:ff:ff:ff too */
	__u8 multicast; /* MAC mode: steer other group addresses too */
	/* MAC mode: the VLAN of untagged (and priority-tagged) frames in
	 * `macs` keys: 0 on a NIC without VLAN settings; 0xffff for a trunk
	 * without a native VLAN, whose untagged frames match no key. */
	__u16 native_vlan;
};

/* Key of `macs`: a MAC in a VLAN (0-4094, host order), 8 bytes with no
 * padding, so keys compare whole. */
struct xvs_mac {
	__u8 addr[ETH_ALEN];
	__u16 vlan;
};

/* Value of `macs`: the switch port that owns the MAC, for people reading
 * a bpftool dump (the program only tests presence). */
struct xvs_mac_owner {
	__u32 port;
};

/* Keys of `host_v4` and `host_v6`: one of the host's addresses, in network
 * order. Byte arrays, so bpftool prints them byte by byte, not as one
 * byte-swapped number. */
struct xvs_ip4 {
	__u8 addr[4];
};

struct xvs_ip6 {
	__u8 addr[16];
};

/* Value of `host_v4` and `host_v6`: the interface the address is
 * configured on, for people reading a bpftool dump (the program only
 * tests presence). */
struct xvs_host_addr {
	__u32 ifindex;
};

/* Value of `queue_owners`, by rx queue: whether a VM owns the queue, and
 * the VM's MAC. The queue's socket then sits on the VM's memory (a frame
 * redirected there is written into the VM), so only frames to that MAC
 * may be redirected to it. Zero (the array's default): not owned. */
struct xvs_queue_owner {
	__u8 addr[ETH_ALEN];
	__u8 owned;
	__u8 pad;
};

/* Per-verdict frame counts, one copy per CPU (summed by the loader). */
struct xvs_counters {
	/* Steered, and the rx queue's slot holds a socket. Delivery can still
	 * fail in the socket (ring full): its XDP_STATISTICS count that. */
	__u64 redirected;
	/* Steered, but no socket in the rx queue's slot: passed to the kernel
	 * (bpf_redirect_map's fallback action), not dropped. */
	__u64 no_socket_passed;
	/* Steered, but the rx queue is beyond the XSKMAP: passed. */
	__u64 bad_queue_passed;
	/* Not the switch's frame (policy): passed to the kernel. */
	__u64 not_owned_passed;
	/* Shorter than an Ethernet header: passed (the kernel drops it). */
	__u64 short_passed;
	/* Group frames the policy would steer, passed because they are the
	 * host's: an ARP packet whose target protocol address is in
	 * `host_v4`, an ICMPv6 Neighbor Solicitation whose target is in
	 * `host_v6`. */
	__u64 host_arp_passed;
	__u64 host_nd_passed;
	/* Of the steered frames, how many were broadcast / other multicast. */
	__u64 steered_broadcast;
	__u64 steered_multicast;
	/* MAC mode: a group frame the policy does not steer, passed to the
	 * kernel (not_owned_passed then counts unicast alone). */
	__u64 group_passed;
	/* Steered, but the rx queue is owned by a VM and the frame is not to
	 * its MAC (another VM's unicast, broadcast, multicast): passed to the
	 * kernel rather than written into the owner's memory. */
	__u64 owned_queue_passed;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XVS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XVS_MAX_MACS);
	__type(key, struct xvs_mac);
	__type(value, struct xvs_mac_owner);
} macs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xvs_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XVS_MAX_HOST_ADDRS);
	__type(key, struct xvs_ip4);
	__type(value, struct xvs_host_addr);
} host_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XVS_MAX_HOST_ADDRS);
	__type(key, struct xvs_ip6);
	__type(value, struct xvs_host_addr);
} host_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XVS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct xvs_queue_owner);
} queue_owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xvs_counters);
} counters SEC(".maps");

/* Whether the switch owns a frame with this destination, under cfg; sets
 * *bcast or *mcast for group addresses, whatever the answer. The caller
 * has checked that an Ethernet header is there. */
static __always_inline int owned(const struct xvs_config *cfg, void *data, void *data_end,
				 int *bcast, int *mcast)
{
	const struct ethhdr *eth = data;
	const __u8 *dst = eth->h_dest;

	if (dst[0] & 1) { /* I/G bit: a group address */
		if ((dst[0] & dst[1] & dst[2] & dst[3] & dst[4] & dst[5]) == 0xff)
			*bcast = 1;
		else
			*mcast = 1;
	}
	if (cfg->mode == XVS_MODE_ALL)
		return 1;
	if (cfg->mode != XVS_MODE_MAC)
		return 0;
	if (*bcast)
		return cfg->broadcast;
	if (*mcast)
		return cfg->multicast;
	struct xvs_mac key = {.vlan = cfg->native_vlan};
	__builtin_memcpy(key.addr, dst, ETH_ALEN);
	/* One 802.1Q tag: its id is the frame's VLAN, as the switch sees it
	 * (vswitch/vlan.go); a priority tag (id 0) is untagged. */
	const struct vlan_hdr *vh = data + ETH_HLEN;
	if (eth->h_proto == bpf_htons(ETH_P_8021Q) && (void *)(vh + 1) <= data_end) {
		__u16 id = bpf_ntohs(vh->h_vlan_TCI) & 0x0fff;
		if (id)
			key.vlan = id;
	}
	return bpf_map_lookup_elem(&macs, &key) != 0;
}

/* Whether two MACs are equal (no memcmp in BPF). */
static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) |
		(a[4] ^ b[4]) | (a[5] ^ b[5])) == 0;
}

enum xvs_host_frame {
	XVS_NOT_HOST = 0,
	XVS_HOST_ARP = 1, /* ARP with a target protocol address of the host's */
	XVS_HOST_ND = 2,  /* Neighbor Solicitation for a target of the host's */
};

/* Whether a group frame is address resolution for one of the host's own
 * addresses, which the kernel must see to answer (or, for probes and
 * duplicate address detection, to defend the address). Matching is on the
 * target alone, whatever the ARP opcode: a peer's gratuitous ARP or
 * unsolicited broadcast reply names the peer's address as target and stays
 * with the switch, whose VMs need it as much as the host; one naming the
 * host's address is a conflict the host must see. Behind at most one
 * 802.1Q tag, whose VLAN is not matched: the address of a VLAN device on
 * the NIC counts in every VLAN.
 * The caller has checked that an Ethernet header is there. */
static __always_inline enum xvs_host_frame host_frame(void *data, void *data_end)
{
	const struct ethhdr *eth = data;
	void *l3 = data + ETH_HLEN;
	__be16 proto = eth->h_proto;

	if (proto == bpf_htons(ETH_P_8021Q)) {
		const struct vlan_hdr *vh = l3;
		if ((void *)(vh + 1) > data_end)
			return XVS_NOT_HOST;
		proto = vh->h_vlan_encapsulated_proto;
		l3 = (void *)(vh + 1);
	}
	if (proto == bpf_htons(ETH_P_ARP)) {
		const struct xvs_arp_eth *arp = l3;
		if ((void *)(arp + 1) > data_end)
			return XVS_NOT_HOST;
		if (arp->ar_pro != bpf_htons(ETH_P_IP) || arp->ar_hln != ETH_ALEN || arp->ar_pln != 4)
			return XVS_NOT_HOST;
		/* The key is read straight from the packet: bounds checked above. */
		if (bpf_map_lookup_elem(&host_v4, arp->ar_tip))
			return XVS_HOST_ARP;
		return XVS_NOT_HOST;
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		/* Only an NS right after the fixed header: the kernel's own
		 * NS carry no extension headers. */
		const struct xvs_ipv6hdr *ip6 = l3;
		const struct xvs_nd_solicit *ns = (const void *)(ip6 + 1);
		if ((void *)(ns + 1) > data_end)
			return XVS_NOT_HOST;
		if (ip6->nexthdr != IPPROTO_ICMPV6 || ns->type != NDISC_NEIGHBOUR_SOLICITATION || ns->code != 0)
			return XVS_NOT_HOST;
		if (bpf_map_lookup_elem(&host_v6, ns->target))
			return XVS_HOST_ND;
		return XVS_NOT_HOST;
	}
	return XVS_NOT_HOST;
}

SEC("xdp")
int xvs_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;

	struct xvs_counters *c = bpf_map_lookup_elem(&counters, &zero);
	const struct xvs_config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!c || !cfg) /* cannot happen for 1-entry arrays; keeps the verifier sure */
		return XDP_PASS;

	if (data + ETH_HLEN > data_end) {
		c->short_passed++;
		return XDP_PASS;
	}
	const struct ethhdr *eth = data;
	int bcast = 0, mcast = 0;
	if (!owned(cfg, data, data_end, &bcast, &mcast)) {
		if ((bcast | mcast) && cfg->mode == XVS_MODE_MAC)
			c->group_passed++;
		else
			c->not_owned_passed++;
		return XDP_PASS;
	}
	/* Only group frames the MAC policy steers pay for this: unicast to a
	 * VM adds one test of a register. In ModeAll the NIC is the switch's,
	 * the host's address resolution included. */
	if ((bcast | mcast) && cfg->mode == XVS_MODE_MAC) {
		enum xvs_host_frame h = host_frame(data, data_end);
		if (h == XVS_HOST_ARP) {
			c->host_arp_passed++;
			return XDP_PASS;
		}
		if (h == XVS_HOST_ND) {
			c->host_nd_passed++;
			return XDP_PASS;
		}
	}
	if (bcast)
		c->steered_broadcast++;
	if (mcast)
		c->steered_multicast++;

	__u32 q = ctx->rx_queue_index;
	if (q >= XVS_MAX_QUEUES) {
		c->bad_queue_passed++;
		return XDP_PASS;
	}
	/* An array lookup the verifier inlines: the cost for unowned queues. */
	const struct xvs_queue_owner *o = bpf_map_lookup_elem(&queue_owners, &q);
	if (o && o->owned && ((bcast | mcast) || !same_mac(eth->h_dest, o->addr))) {
		c->owned_queue_passed++;
		return XDP_PASS;
	}
	/* An empty slot makes the helper return its fallback, XDP_PASS. */
	long verdict = bpf_redirect_map(&xsks, q, XDP_PASS);
	if (verdict == XDP_REDIRECT)
		c->redirected++;
	else
		c->no_socket_passed++;
	return verdict;
}

char __license[] SEC("license") = "Dual BSD/GPL";
