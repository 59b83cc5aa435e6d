// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * DCTCP as a BPF struct_ops `tcp_congestion_ops`, registered as "bpf_dctcp".
 *
 * A port of the kernel's net/ipv4/tcp_dctcp.c (Borkmann, Westphal, Judd;
 * GPL-2.0-or-later), shaped after the BPF selftest
 * tools/testing/selftests/bpf/progs/bpf_dctcp.c. The algorithm is
 *
 *   Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010, §3.1:
 *     alpha <- (1 - g) * alpha + g * F          (Eq. 1, once per RTT)
 *     cwnd  <- cwnd * (1 - alpha / 2)           (Eq. 2, on ECE)
 *   with F the fraction of CE-marked packets acked in the last RTT.
 *
 * Fixed point as in the kernel: alpha in [0, 1024] (DCTCP_MAX_ALPHA = 1.0),
 * g = 1/2^4, so Eq. 2 is cwnd - (cwnd * alpha) >> 11.
 *
 * Differences from the kernel module, each forced by struct_ops:
 *  - no get_info (struct_ops rejects it), so `ss -i` shows no "dctcp:" line;
 *  - the no-ECN fallback switches the socket to "reno" with
 *    bpf_setsockopt(TCP_CONGESTION) instead of swapping icsk_ca_ops to the
 *    module's private dctcp_reno; tcp_reinit_congestion_control() then clears
 *    ECT, as INET_ECN_dontxmit() does in the kernel;
 *  - no PLB (tcp_plb_*; off by default, net.ipv4.tcp_plb_enabled = 0, and not
 *    callable from BPF).
 *
 * Built by softswitch's build.rs against a vmlinux.h dumped from the build
 * machine's kernel (`bpftool btf dump file /sys/kernel/btf/vmlinux format
 * c`). Its types carry preserve_access_index, so every kernel struct access
 * below is a CO-RE relocation that libbpf (libbpf-rs, at `softswitch topo
 * up`) rewrites to the running kernel's offsets. No libbpf headers are
 * needed: the few macros they would provide are defined here.
 */
#include "vmlinux.h"

#define SEC(name) __attribute__((section(name), used))
#define __ksym __attribute__((section(".ksyms")))
#define __always_inline inline __attribute__((always_inline))

/* #defines from include/net/tcp.h and include/uapi, absent from BTF. */
#define TCP_CONG_NEEDS_ECN 0x2
#define TCP_ECN_MODE_RFC3168 0x1 /* TCP_ECN_OK before 6.15 */
#define TCP_ECN_DEMAND_CWR 0x4
#define TCP_ECN_MODE_ACCECN 0x10 /* 6.15+; never set on older kernels */
#define TCP_ECN_MODE_ANY (TCP_ECN_MODE_RFC3168 | TCP_ECN_MODE_ACCECN)
#define SOL_TCP 6
#define TCP_CONGESTION 13

#define DCTCP_MAX_ALPHA 1024U
/* g = 1/2^dctcp_shift_g; the module parameter's default. */
#define DCTCP_SHIFT_G 4U
/* Module parameter dctcp_alpha_on_init's default: start fully cautious. */
#define DCTCP_ALPHA_ON_INIT DCTCP_MAX_ALPHA

char _license[] SEC("license") = "GPL";

/* Helpers (numbered by enum bpf_func_id, taken from this kernel's BTF). */
static long (*bpf_tcp_send_ack)(void *tp, __u32 rcv_nxt) = (void *)BPF_FUNC_tcp_send_ack;
static long (*bpf_setsockopt)(void *sk, int level, int optname, void *optval,
			      int optlen) = (void *)BPF_FUNC_setsockopt;

/* The kernel's own Reno increase, exported to struct_ops as a kfunc. */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

static const char reno[] = "reno";

/* Per-socket state in icsk_ca_priv; same layout as the kernel's. */
struct dctcp {
	__u32 old_delivered;
	__u32 old_delivered_ce;
	__u32 prior_rcv_nxt;
	__u32 dctcp_alpha;
	__u32 next_seq;
	__u32 ce_state;
	__u32 loss_cwnd;
};

_Static_assert(sizeof(struct dctcp) <= sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct dctcp must fit icsk_ca_priv");

static __always_inline struct tcp_sock *tcp_sk(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline struct dctcp *dctcp_ca(struct sock *sk)
{
	return (struct dctcp *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline __u32 max_u32(__u32 a, __u32 b)
{
	return a > b ? a : b;
}

static __always_inline __u32 min_u32(__u32 a, __u32 b)
{
	return a < b ? a : b;
}

/* min(), except that a zero argument loses. */
static __always_inline __u32 min_not_zero_u32(__u32 a, __u32 b)
{
	return a == 0 ? b : (b == 0 ? a : min_u32(a, b));
}

/* Sequence-space "seq1 < seq2", as the kernel's before(). */
static __always_inline int seq_before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}

/* Start a new observation window of one RTT: until snd_nxt is acked. */
static __always_inline void dctcp_reset(const struct tcp_sock *tp, struct dctcp *ca)
{
	ca->next_seq = tp->snd_nxt;
	ca->old_delivered = tp->delivered;
	ca->old_delivered_ce = tp->delivered_ce;
}

SEC("struct_ops/bpf_dctcp_init")
void bpf_dctcp_init(unsigned long long *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	struct tcp_sock *tp = tcp_sk(sk);

	if ((tp->ecn_flags & TCP_ECN_MODE_ANY) || sk->__sk_common.skc_state == TCP_LISTEN ||
	    sk->__sk_common.skc_state == TCP_CLOSE) {
		struct dctcp *ca = dctcp_ca(sk);

		ca->prior_rcv_nxt = tp->rcv_nxt;
		ca->dctcp_alpha = min_u32(DCTCP_ALPHA_ON_INIT, DCTCP_MAX_ALPHA);
		ca->loss_cwnd = 0;
		ca->ce_state = 0;
		dctcp_reset(tp, ca);
		return;
	}

	/* The peer did not negotiate ECN: behave as Reno, not ECN-capable.
	 * Switching the socket's congestion control also clears ECT.
	 */
	bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, (void *)reno, sizeof(reno));
}

/* Eq. 2: on ECE (or loss) cut cwnd by alpha/2, but keep at least 2. */
SEC("struct_ops/bpf_dctcp_ssthresh")
__u32 bpf_dctcp_ssthresh(unsigned long long *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp *ca = dctcp_ca(sk);
	__u32 cwnd = tp->snd_cwnd;

	ca->loss_cwnd = cwnd;
	return max_u32(cwnd - ((cwnd * ca->dctcp_alpha) >> 11U), 2U);
}

/* Eq. 1, once per RTT (when the window that started at next_seq is acked). */
SEC("struct_ops/bpf_dctcp_update_alpha")
void bpf_dctcp_update_alpha(unsigned long long *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp *ca = dctcp_ca(sk);

	if (seq_before(tp->snd_una, ca->next_seq))
		return;

	__u32 delivered = tp->delivered - ca->old_delivered;
	__u32 delivered_ce = tp->delivered_ce - ca->old_delivered_ce;
	__u32 alpha = ca->dctcp_alpha;

	/* (1 - g) * alpha; min_not_zero lets a small alpha decay to 0. */
	alpha -= min_not_zero_u32(alpha, alpha >> DCTCP_SHIFT_G);
	if (delivered_ce) {
		/* + g * F, F = delivered_ce / delivered scaled to 1024. */
		delivered_ce <<= (10U - DCTCP_SHIFT_G);
		delivered_ce /= max_u32(1U, delivered);
		alpha = min_u32(alpha + delivered_ce, DCTCP_MAX_ALPHA);
	}
	ca->dctcp_alpha = alpha;
	dctcp_reset(tp, ca);
}

/* Loss (fast retransmit or RTO): halve like Reno, remember cwnd for undo. */
static __always_inline void dctcp_react_to_loss(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp *ca = dctcp_ca(sk);

	ca->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = max_u32(tp->snd_cwnd >> 1U, 2U);
}

SEC("struct_ops/bpf_dctcp_state")
void bpf_dctcp_state(unsigned long long *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	__u8 new_state = (__u8)ctx[1];

	/* RTOs are handled in cwnd_event (CA_EVENT_LOSS) so that there is only
	 * one loss reaction per RTT.
	 */
	if (new_state == TCP_CA_Recovery && new_state != inet_csk(sk)->icsk_ca_state)
		dctcp_react_to_loss(sk);
}

/* Receiver: ECE on our ACKs mirrors the CE state of the last data segment. */
static __always_inline void dctcp_ece_ack_cwr(struct sock *sk, __u32 ce_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ce_state == 1)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

/*
 * Receiver CE state machine (DCTCP paper §3.1, "ECN-Echo at the receiver",
 * with delayed ACKs): state 0 = last segment not CE, 1 = last segment CE.
 * On a change, an ACK that was being delayed is sent first with the old ECE
 * value for the old rcv_nxt, then an immediate ACK carries the new state, so
 * the sender sees exactly which bytes were marked.
 */
static __always_inline void dctcp_ece_ack_update(struct sock *sk, enum tcp_ca_event evt,
						 __u32 *prior_rcv_nxt, __u32 *ce_state)
{
	__u32 new_ce_state = (evt == CA_EVENT_ECN_IS_CE) ? 1 : 0;

	if (*ce_state != new_ce_state) {
		if (inet_csk(sk)->icsk_ack.pending & ICSK_ACK_TIMER) {
			dctcp_ece_ack_cwr(sk, *ce_state);
			bpf_tcp_send_ack(sk, *prior_rcv_nxt);
		}
		inet_csk(sk)->icsk_ack.pending |= ICSK_ACK_NOW;
	}
	*prior_rcv_nxt = tcp_sk(sk)->rcv_nxt;
	*ce_state = new_ce_state;
	dctcp_ece_ack_cwr(sk, new_ce_state);
}

SEC("struct_ops/bpf_dctcp_cwnd_event")
void bpf_dctcp_cwnd_event(unsigned long long *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	enum tcp_ca_event ev = (enum tcp_ca_event)ctx[1];
	struct dctcp *ca = dctcp_ca(sk);

	switch (ev) {
	case CA_EVENT_ECN_IS_CE:
	case CA_EVENT_ECN_NO_CE:
		dctcp_ece_ack_update(sk, ev, &ca->prior_rcv_nxt, &ca->ce_state);
		break;
	case CA_EVENT_LOSS:
		dctcp_react_to_loss(sk);
		break;
	default:
		break;
	}
}

SEC("struct_ops/bpf_dctcp_cwnd_undo")
__u32 bpf_dctcp_cwnd_undo(unsigned long long *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	struct dctcp *ca = dctcp_ca(sk);

	return max_u32(tcp_sk(sk)->snd_cwnd, ca->loss_cwnd);
}

SEC("struct_ops/bpf_dctcp_cong_avoid")
void bpf_dctcp_cong_avoid(unsigned long long *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];

	tcp_reno_cong_avoid(sk, (__u32)ctx[1], (__u32)ctx[2]);
}

/* The map name (the variable) and the congestion control name are both
 * "bpf_dctcp". ".struct_ops.link" (Linux >= 6.4): registration is a BPF link,
 * which softswitch pins under /sys/fs/bpf so it outlives `topo up`; removing
 * the pin (`topo down`) unregisters it.
 */
SEC(".struct_ops.link")
struct tcp_congestion_ops bpf_dctcp = {
	.init = (void *)bpf_dctcp_init,
	.in_ack_event = (void *)bpf_dctcp_update_alpha,
	.cwnd_event = (void *)bpf_dctcp_cwnd_event,
	.ssthresh = (void *)bpf_dctcp_ssthresh,
	.cong_avoid = (void *)bpf_dctcp_cong_avoid,
	.undo_cwnd = (void *)bpf_dctcp_cwnd_undo,
	.set_state = (void *)bpf_dctcp_state,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = "bpf_dctcp",
};
