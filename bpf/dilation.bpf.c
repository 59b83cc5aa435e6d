// SPDX-License-Identifier: GPL-2.0
/*
 * Host timers of a time-dilated experiment that only BPF can set.
 *
 * softswitch `topo up --dilation D` attaches this sock_ops program to the
 * root cgroup (cgroup v2) through a BPF link pinned in bpffs, and puts each
 * host namespace's cookie in `dilated_netns` with what its sockets get. The
 * program acts only on sockets of those namespaces: for every other socket
 * on the machine it leaves the kernel's answer (reply 0 = default).
 *
 * What it sets: the initial retransmission timeout of a SYN and of a
 * SYN-ACK (BPF_SOCK_OPS_TIMEOUT_INIT; the kernel's TCP_TIMEOUT_INIT, 1 s),
 * to D x 1 s. The kernel asks for it in jiffies; CONFIG_HZ comes from the
 * running kernel's config (libbpf's __kconfig).
 *
 * What it does not set, and why (README, "Time dilation"): RTO_min is a
 * per-namespace sysctl (tcp_rto_min_us) with no upper bound, while
 * TCP_BPF_RTO_MIN refuses anything above 200 ms; TCP_BPF_DELACK_MAX only
 * caps the delayed-ACK timer, which Linux never sets below its 40 ms
 * minimum (TCP_ATO_MIN), so no BPF option can stretch it.
 */
#include "vmlinux.h"

/* The few libbpf macros this needs (no libbpf headers, as bpf/dctcp.bpf.c). */
#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define __kconfig __attribute__((section(".kconfig")))

/* Helpers (numbered by enum bpf_func_id, taken from this kernel's BTF). */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static __u64 (*bpf_get_netns_cookie)(void *ctx) = (void *)BPF_FUNC_get_netns_cookie;

/* Per dilated namespace (key: its netns cookie). */
struct host_timers {
	__u32 syn_rto_us;   /* initial RTO of SYN and SYN-ACK, µs (real time) */
	__u32 _pad;
	__u64 syn_rto_set;  /* how many times the program answered */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct host_timers);
} dilated_netns SEC(".maps");

extern unsigned int CONFIG_HZ __kconfig;

SEC("sockops")
int softswitch_dilation(struct bpf_sock_ops *skops)
{
	struct host_timers *t;
	__u64 cookie, jiffies;

	if (skops->op != BPF_SOCK_OPS_TIMEOUT_INIT)
		return 1;
	cookie = bpf_get_netns_cookie(skops);
	t = bpf_map_lookup_elem(&dilated_netns, &cookie);
	if (!t || !t->syn_rto_us)
		return 1;
	/* Rounded up to whole jiffies, as the kernel rounds its own. */
	jiffies = ((__u64)t->syn_rto_us * CONFIG_HZ + 999999) / 1000000;
	skops->reply = jiffies ? jiffies : 1;
	__sync_fetch_and_add(&t->syn_rto_set, 1);
	return 1;
}

char _license[] SEC("license") = "GPL";
