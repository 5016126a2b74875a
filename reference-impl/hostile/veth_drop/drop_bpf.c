// Drop-everything programs for run.sh: the cheapest possible verdict at each hook, so that the
// difference between hooks is the kernel's path to them, not the program.
#include <linux/bpf.h>
#define SEC(n) __attribute__((section(n), used))
// xdp.frags: the veth's MTU (9000, as the testbed's) is above what non-frags XDP allows.
SEC("xdp.frags") int xdp_drop(struct xdp_md* ctx) {
  return XDP_DROP;
}
SEC("tc") int tc_drop(struct __sk_buff* skb) {
  return 2; /* TC_ACT_SHOT */
}
char _license[] SEC("license") = "GPL";
