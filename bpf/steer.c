//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * xvs_steer: the XDP program xvswitch attaches to every NIC it switches.
 *
 * It redirects to the AF_XDP socket of the frame's rx queue (the XSKMAP
 * `xsks`) only the frames the switch owns, and passes everything else to
 * the kernel, so the host keeps using the same NIC. What the switch owns is
 * the interface's policy in `config`: nothing, everything, or frames whose
 * destination MAC is one of the VMs' (the hash map `macs`) plus, if asked,
 * broadcast and multicast. Every frame is counted exactly once by verdict
 * in the per-CPU `counters`:
 *
 *   frames = redirected + no_socket_passed + bad_queue_passed
 *          + not_owned_passed + short_passed
 *
 * All names (program, maps, struct fields) are stable: the Go loader, the
 * pins under /sys/fs/bpf/xvswitch/<ifname>/ and bpftool dumps use them.
 */
#include "xvs_kernel.h"
#include <bpf/bpf_helpers.h>

/* Slots of the XSKMAP: rx queues beyond it are never steered. */
#define XVS_MAX_QUEUES 256
/* VM MACs one interface can steer. */
#define XVS_MAX_MACS 4096

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
	__u8 pad[2];
};

/* Key of `macs`: padded to 8 bytes so keys compare whole; pad is zero. */
struct xvs_mac {
	__u8 addr[ETH_ALEN];
	__u8 pad[2];
};

/* Value of `macs`: the switch port that owns the MAC, for people reading
 * a bpftool dump (the program only tests presence). */
struct xvs_mac_owner {
	__u32 port;
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
	/* Of the steered frames, how many were broadcast / other multicast. */
	__u64 steered_broadcast;
	__u64 steered_multicast;
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
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xvs_counters);
} counters SEC(".maps");

/* Whether the switch owns a frame with this destination, under cfg; sets
 * *bcast or *mcast for group addresses, whatever the answer. */
static __always_inline int owned(const struct xvs_config *cfg, const __u8 *dst,
				 int *bcast, int *mcast)
{
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
	struct xvs_mac key = {};
	__builtin_memcpy(key.addr, dst, ETH_ALEN);
	return bpf_map_lookup_elem(&macs, &key) != 0;
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
	if (!owned(cfg, eth->h_dest, &bcast, &mcast)) {
		c->not_owned_passed++;
		return XDP_PASS;
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
	/* An empty slot makes the helper return its fallback, XDP_PASS. */
	long verdict = bpf_redirect_map(&xsks, q, XDP_PASS);
	if (verdict == XDP_REDIRECT)
		c->redirected++;
	else
		c->no_socket_passed++;
	return verdict;
}

char __license[] SEC("license") = "Dual BSD/GPL";
