/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The few kernel UAPI types and constants the steering program needs,
 * written out by hand instead of a 2.8 MB vmlinux.h or <linux/bpf.h>
 * (which, compiled for -target bpf, drags in <asm/types.h> from a multiarch
 * folder clang does not search). Values are those of include/uapi/linux/bpf.h,
 * if_ether.h and if_vlan.h, and the wire formats of the RFCs named below;
 * they never change.
 */
#ifndef XVS_KERNEL_H
#define XVS_KERNEL_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;

/* bpf_helpers.h's __ksym and friends test this; not used here. */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_XSKMAP = 17,
};

/* Flags of map definitions. */
#define BPF_F_NO_PREALLOC (1U << 0)

enum xdp_action {
	XDP_ABORTED = 0,
	XDP_DROP,
	XDP_PASS,
	XDP_TX,
	XDP_REDIRECT,
};

/* What an XDP program sees of a frame (struct xdp_md in uapi/linux/bpf.h). */
struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
};

#define ETH_ALEN 6
#define ETH_HLEN 14

struct ethhdr {
	__u8 h_dest[ETH_ALEN];
	__u8 h_source[ETH_ALEN];
	__be16 h_proto;
} __attribute__((packed));

/* Ethertypes (if_ether.h). */
#define ETH_P_IP 0x0800
#define ETH_P_ARP 0x0806
#define ETH_P_8021Q 0x8100
#define ETH_P_IPV6 0x86DD

/* An 802.1Q tag, after the MAC addresses (if_vlan.h). */
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
} __attribute__((packed));

/* Wire formats below are not UAPI structs but the RFCs' layouts. */

/* An ARP packet for IPv4 over Ethernet (RFC 826): struct arphdr of
 * if_arp.h followed by the addresses it sizes (hln 6, pln 4). */
struct xvs_arp_eth {
	__be16 ar_hrd;
	__be16 ar_pro;
	__u8 ar_hln;
	__u8 ar_pln;
	__be16 ar_op;
	__u8 ar_sha[ETH_ALEN];
	__u8 ar_sip[4];
	__u8 ar_tha[ETH_ALEN];
	__u8 ar_tip[4];
} __attribute__((packed));

/* The fixed IPv6 header (RFC 8200; struct ipv6hdr of ipv6.h). */
struct xvs_ipv6hdr {
	__u8 ver_tc_flow[4];
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u8 saddr[16];
	__u8 daddr[16];
} __attribute__((packed));

#define IPPROTO_ICMPV6 58
#define NDISC_NEIGHBOUR_SOLICITATION 135

/* An ICMPv6 Neighbor Solicitation up to its target (RFC 4861 4.3). */
struct xvs_nd_solicit {
	__u8 type;
	__u8 code;
	__be16 cksum;
	__be32 reserved;
	__u8 target[16];
} __attribute__((packed));

#endif /* XVS_KERNEL_H */
