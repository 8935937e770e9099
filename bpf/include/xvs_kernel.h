/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The few kernel UAPI types and constants the steering program needs,
 * written out by hand instead of a 2.8 MB vmlinux.h or <linux/bpf.h>
 * (which, compiled for -target bpf, drags in <asm/types.h> from a multiarch
 * folder clang does not search). Values are those of include/uapi/linux/bpf.h
 * and if_ether.h; they are ABI and never change.
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

#endif /* XVS_KERNEL_H */
