// SPDX-License-Identifier: GPL-2.0
/*
 * Test helper: a tc (cls_bpf, direct-action) program that sets CE on
 * ECN-capable IPv4 packets with probability MARK_PER_MILLE / 1000, fixing
 * the IP header checksum. Attached at a host's ingress it stands in for a
 * marking switch. Built by netns-tests/common/mod.rs with
 * clang -O2 -target bpf -DMARK_PER_MILLE=<n>.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <stddef.h>
#define SEC(n) __attribute__((section(n), used))
static long (*bpf_skb_load_bytes)(const void *skb, __u32 off, void *to, __u32 len) = (void *)BPF_FUNC_skb_load_bytes;
static long (*bpf_skb_store_bytes)(void *skb, __u32 off, const void *from, __u32 len, __u64 flags) = (void *)BPF_FUNC_skb_store_bytes;
static long (*bpf_l3_csum_replace)(void *skb, __u32 off, __u64 from, __u64 to, __u64 size) = (void *)BPF_FUNC_l3_csum_replace;
static __u32 (*bpf_get_prandom_u32)(void) = (void *)BPF_FUNC_get_prandom_u32;
#ifndef MARK_PER_MILLE
#define MARK_PER_MILLE 10
#endif
SEC("tc") int ce_mark(struct __sk_buff *skb)
{
	if (skb->protocol != __constant_htons(ETH_P_IP))
		return TC_ACT_OK;
	__u32 off = ETH_HLEN + offsetof(struct iphdr, tos);
	__u8 tos;
	if (bpf_skb_load_bytes(skb, off, &tos, 1))
		return TC_ACT_OK;
	if ((tos & 3) == 0 || (tos & 3) == 3)
		return TC_ACT_OK;
	if (bpf_get_prandom_u32() % 1000 >= MARK_PER_MILLE)
		return TC_ACT_OK;
	__u8 new_tos = tos | 3;
	bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), __constant_htons(tos), __constant_htons(new_tos), 2);
	bpf_skb_store_bytes(skb, off, &new_tos, 1, 0);
	return TC_ACT_OK;
}
char _license[] SEC("license") = "GPL";
