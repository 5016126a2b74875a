// The kernel receive filter of the AF_PACKET back end: an eBPF program, assembled here and
// loaded with the bpf() system call (no library), that refuses in the kernel, before the frame
// is copied into the receive ring and before the loop thread is woken for it, the packets the
// engine would refuse anyway: data duplicates (PSN <= the QP's cumulative PSN), data PSNs far
// beyond its window, and NACKs (UNEXP_EVENT among them) that name no PSN the requester has
// outstanding. Under a flood of them the ring copy, the wake-up and the engine's decode and
// ICRC check cost the victim 2-3 us per frame (docs/performance.md, "Hostile floods"); the
// filter costs a few hundred instructions of the sender's softirq.
//
// Where it runs: with the tap receive (RuntimeConfig::rx_tap, the default) as the socket filter
// of the rings, which are taps served before tc ingress; the ingress sink (IngressSink, below)
// then ends at tc ingress the frames they took, refused ones included. Otherwise on the
// interface's tc ingress hook (TCX, Linux 6.6+) when the kernel lets us attach it there, else
// as the ring's socket filter. At tc ingress a refused frame is dropped
// before the IPv6 and UDP receive path of the endpoint's namespace (which every frame to port
// 4791 otherwise takes, up to the sink socket's drop-all filter: Udp6InErrors) and before the
// packet socket; the ring then keeps the classic filter. The same program serves both, only
// its verdicts differ (a socket filter returns the bytes to keep, tc an action).
//
// What the kernel decides from: one array map of one element, mmapped (BPF_F_MMAPABLE), that
// the loop thread rewrites from Endpoint::rx_gates() before the transmit that follows a change
// of them, and that holds the filter's counters. Layout (byte offsets, host order; the kOff*
// and kBucket* constants below):
//    8  u64 NACKs refused (no outstanding PSN)
//   16  u64 refusable frames a bucket passed on (to the engine, whose own bucket answers them)
//   24  u32 bitmap of the data opcodes (256 bits, the wire profile's)
//   56  u32 DSCP trimmed    60 u32 DSCP trimmed last hop (trimmed packets are never refused)
//   64  u32 RoCE UDP port
//   80  64 QP slots of 48 B, slot = QPN mod 64: u32 QPN + 1 (0 = empty), u32 cumulative PSN,
//       u32 refusal limit (PSNs beyond it are out of window), u32 the requester's cumulative
//       ACK, 4 x u32 peer GID words (as BPF_LD_ABS reads them: big-endian words in host
//       order), u64 the QP bucket's theoretical arrival time, u32 the requester's window (0:
//       not sending, NACKs passed), u32 unused.
//   then the endpoint-request opcode bitmap, the strangers' arrival time, 16 peer entries,
//   four buckets (duplicates, out of window, a peer's EV probes, strangers' requests): gap,
//   tau and the count of frames refused; then the NACK opcode bitmap, the endpoint's own GID
//   (4 x u32 words) and u32 whether it is set: frames to another address are never refused
//   (at tc ingress the program sees the traffic of every process on the interface).
// The buckets are the engine's (burst, then one per interval; GCRA, no division in the kernel),
// so that everything the engine's own bucket would answer still reaches it.
//
// Why a frame it refuses is never a legitimate one: the published cumulative PSN only lags the
// engine's (a PSN at or below it was placed), and the limit is twice the window: the peer sends
// at most a window beyond the cumulative PSN it learnt from our SACKs, and every SACK leaves
// after the publication that covers it. Anything else (other opcodes, trimmed packets, frames
// too short to hold a BTH, outer SRv6 headers, QPs not in the map, a peer other than the QP's)
// goes to the engine as before.
// A NACK is refused when it names a PSN at or before the requester's published cumulative ACK
// or more than its window (the negotiated MPR) beyond it, which is what Qp::on_nack drops as
// not outstanding (Qp::entry: PSN after cack_seen and before snd_nxt): the published ACK only
// lags the engine's, and a new PSN leaves only within MPR of the ACK the engine had when it
// last published, which was before that transmit. Its EV and the PSN's SACK state are the
// engine's to check; nothing is answered to such a NACK, so none is sampled through.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "reference-impl/runtime/sys.h"

#ifndef BPF_F_MMAPABLE
#define BPF_F_MMAPABLE (1U << 10)
#endif
#ifndef BPF_PSEUDO_MAP_VALUE
#define BPF_PSEUDO_MAP_VALUE 2
#endif
// tc ingress through a BPF link (Linux 6.6); older uapi headers do not name it.
constexpr uint32_t kBpfTcxIngress = 46;

namespace mrc::runtime {
namespace {

constexpr int kOffNacksRefused = 8;
constexpr int kOffSampled = 16;
constexpr int kOffOpBitmap = 24;
constexpr int kOffDscpTrimmed = 56;
constexpr int kOffDscpTrimmedLastHop = 60;
constexpr int kOffRocePort = 64;
constexpr int kOffSlots = 80;
constexpr int kSlotBytes = 48;
constexpr uint32_t kSlots = 64;
constexpr int kSlotQpn = 0, kSlotCack = 4, kSlotLimit = 8, kSlotSndCack = 12, kSlotGid = 16,
              kSlotLastPass = 32, kSlotSndWindow = 40;
// Endpoint requests (DestQP 2): per-peer and stranger buckets, 16 peer entries of 32 B hashed by
// the low 4 bits of the GID: 4 x u32 GID words, u32 mode (0 empty, 1 one peer, 2 several peers
// hash here: pass all), u64 last pass (ns).
constexpr int kOffEpBitmap = kOffSlots + static_cast<int>(kSlots) * kSlotBytes;  // 3152
constexpr int kOffStrangerLast = kOffEpBitmap + 32;
constexpr int kOffPeers = kOffStrangerLast + 8;
constexpr int kPeerBytes = 32;
constexpr uint32_t kPeers = 16;
constexpr int kPeerMode = 16, kPeerLastPass = 24;
// The buckets (GCRA: a frame passes when its bucket's theoretical arrival time is at most
// now + tau, which then moves to max(it, now) + gap; tau = (burst - 1) x gap), 24 B each: u64
// gap (ns), u64 tau (ns), u64 frames refused. Each QP slot and peer entry and the strangers keep
// their arrival time in their "last pass" field.
constexpr int kOffBuckets = kOffPeers + static_cast<int>(kPeers) * kPeerBytes;
constexpr int kBucketBytes = 24;
constexpr int kBucketDuplicates = kOffBuckets, kBucketOutOfWindow = kOffBuckets + kBucketBytes,
              kBucketEpPeer = kOffBuckets + 2 * kBucketBytes,
              kBucketEpStranger = kOffBuckets + 3 * kBucketBytes;
constexpr int kBucketGap = 0, kBucketTau = 8, kBucketRefused = 16;
constexpr int kOffNackBitmap = kOffBuckets + 4 * kBucketBytes;
constexpr int kOffLocalGid = kOffNackBitmap + 32;
constexpr int kOffLocalGidSet = kOffLocalGid + 16;
constexpr uint32_t kValueBytes = kOffLocalGidSet + 8;
static_assert(kOffPeers % 8 == 0 && kOffStrangerLast % 8 == 0);

// Frame offsets (Ethernet + IPv6 + UDP + BTH).
constexpr int kIp6Vtc = 14, kIp6Next = 20, kIp6Src = 22, kIp6Dst = 38, kUdpDport = 56,
              kBthOpcode = 62, kBthQpnWord = 66, kBthPsnWord = 70;
constexpr uint32_t kMinBthFrame = 74;
constexpr int kErthOp = 75;             // ERTH right behind the BTH (no TSETH: not data)
constexpr uint32_t kMinErthFrame = 80;  // through the ERTH's port-status mask
constexpr int kNethPsnWord = 86;        // NETH right behind the BTH: NACK PSN in bytes 87..89
constexpr uint32_t kMinNethFrame = 90;
constexpr int kEthType = 12;
// The bytes the program reads, from the Ethernet header: through the NACK's PSN, the farthest
// load. A frame this long is copied to the stack once and judged from there (build_program).
constexpr uint32_t kHeaderBytes = kMinNethFrame;

// The verdicts. A socket filter returns the bytes to keep (0: not for this socket); at tc
// ingress every frame that is not refused goes on (TC_ACT_OK), a refused one is dropped.
struct Verdicts {
  int32_t not_ours, refused, pass;
};
constexpr Verdicts kSocketVerdicts{0, 0, 0x40000};  // snap length: the whole frame
constexpr Verdicts kTcVerdicts{TC_ACT_OK, TC_ACT_SHOT, TC_ACT_OK};

int sys_bpf(int cmd, bpf_attr& attr) {
  return static_cast<int>(syscall(__NR_bpf, cmd, &attr, sizeof attr));
}

// A minimal assembler: instructions plus forward jumps to named labels.
class Asm {
 public:
  enum Reg : uint8_t { R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 };
  void ins(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xF;
    i.src_reg = src & 0xF;
    i.off = off;
    i.imm = imm;
    prog_.push_back(i);
  }
  void mov(uint8_t dst, uint8_t src) { ins(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0); }
  void movi(uint8_t dst, int32_t imm) { ins(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
  void alui(uint8_t op, uint8_t dst, int32_t imm) { ins(BPF_ALU64 | op | BPF_K, dst, 0, 0, imm); }
  void alu(uint8_t op, uint8_t dst, uint8_t src) { ins(BPF_ALU64 | op | BPF_X, dst, src, 0, 0); }
  // R0 = the frame's bytes at `off` (1, 2 or 4, big-endian on the wire, host order in R0). By
  // default a BPF_LD_ABS; in from_stack mode a load from the copy of the headers at
  // stack_frame_ and a byte swap, which is what BPF_LD_ABS does without its helper call.
  void ld_abs(uint8_t size, int32_t off) {
    if (!from_stack_) {
      ins(BPF_LD | BPF_ABS | size, 0, 0, 0, off);
      return;
    }
    ldx(size, R0, R10, static_cast<int16_t>(stack_frame_ + off));
    if (size != BPF_B) ins(BPF_ALU | BPF_END | BPF_TO_BE, R0, 0, 0, size == BPF_H ? 16 : 32);
  }
  // Where the copy of the headers starts on the stack (R10 + stack_frame_), and whether ld_abs
  // reads it; labels from here on are scoped by `prefix` (the program's body is emitted twice).
  void body(bool from_stack, const std::string& prefix) {
    from_stack_ = from_stack;
    prefix_ = prefix;
  }
  static constexpr int16_t stack_frame_ = -94;
  void ldx(uint8_t size, uint8_t dst, uint8_t src, int16_t off) {
    ins(BPF_LDX | BPF_MEM | size, dst, src, off, 0);
  }
  void stx(uint8_t size, uint8_t dst, uint8_t src, int16_t off) {
    ins(BPF_STX | BPF_MEM | size, dst, src, off, 0);
  }
  void atomic_add64(uint8_t dst, uint8_t src, int16_t off) {
    ins(BPF_STX | BPF_ATOMIC | BPF_DW, dst, src, off, BPF_ADD);
  }
  void map_value(uint8_t dst, int map_fd) {
    ins(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_VALUE, 0, map_fd);
    ins(0, 0, 0, 0, 0);  // second half: offset 0 into the value
  }
  void call(int32_t helper) { ins(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
  void exit() { ins(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }
  // Conditional jumps to `label`: register against immediate or register.
  void jmpi(uint8_t op, uint8_t dst, int32_t imm, const std::string& label) {
    fix_.emplace_back(prog_.size(), prefix_ + label);
    ins(BPF_JMP | op | BPF_K, dst, 0, 0, imm);
  }
  // The same, comparing the low 32 bits only (JMP32: the immediate is not sign-extended to 64).
  void jmp32i(uint8_t op, uint8_t dst, int32_t imm, const std::string& label) {
    fix_.emplace_back(prog_.size(), prefix_ + label);
    ins(BPF_JMP32 | op | BPF_K, dst, 0, 0, imm);
  }
  void jmp(uint8_t op, uint8_t dst, uint8_t src, const std::string& label) {
    fix_.emplace_back(prog_.size(), prefix_ + label);
    ins(BPF_JMP | op | BPF_X, dst, src, 0, 0);
  }
  void ja(const std::string& label) {
    fix_.emplace_back(prog_.size(), prefix_ + label);
    ins(BPF_JMP | BPF_JA, 0, 0, 0, 0);
  }
  void label(const std::string& name) { labels_[prefix_ + name] = prog_.size(); }
  std::vector<bpf_insn> finish() {
    for (const auto& [at, name] : fix_)
      prog_[at].off =
          static_cast<int16_t>(static_cast<long>(labels_.at(name)) - static_cast<long>(at) - 1);
    return prog_;
  }

 private:
  std::vector<bpf_insn> prog_;
  std::vector<std::pair<size_t, std::string>> fix_;
  std::map<std::string, size_t> labels_;
  bool from_stack_ = false;
  std::string prefix_;
};

// R3 = bit R0 (an opcode) of the 256-bit bitmap at `off` in the map (R7); clobbers R0-R2.
void bitmap_test(Asm& a, int off) {
  using R = Asm::Reg;
  a.mov(R::R1, R::R0);
  a.alui(BPF_RSH, R::R1, 5);
  a.alui(BPF_AND, R::R1, 7);
  a.alui(BPF_LSH, R::R1, 2);
  a.mov(R::R2, R::R7);
  a.alu(BPF_ADD, R::R2, R::R1);
  a.ldx(BPF_W, R::R3, R::R2, static_cast<int16_t>(off));
  a.alui(BPF_AND, R::R0, 31);
  a.alu(BPF_RSH, R::R3, R::R0);
  a.alui(BPF_AND, R::R3, 1);
}

// R9 = the slot of the frame's DestQP, if the slot names that QP and its peer is the frame's
// source; otherwise on to "pass". Clobbers R0-R5.
void slot_of_peer(Asm& a) {
  using R = Asm::Reg;
  // The QP's slot: R9 = map + kOffSlots + (qpn % 64) * 48; its QPN + 1 must match.
  a.ld_abs(BPF_W, kBthQpnWord);
  a.alui(BPF_AND, R::R0, 0xFFFFFF);
  a.mov(R::R1, R::R0);
  a.alui(BPF_AND, R::R1, kSlots - 1);
  a.alui(BPF_MUL, R::R1, kSlotBytes);
  a.mov(R::R9, R::R7);
  a.alu(BPF_ADD, R::R9, R::R1);
  a.alui(BPF_ADD, R::R0, 1);
  a.ldx(BPF_W, R::R1, R::R9, kOffSlots + kSlotQpn);
  a.jmp(BPF_JNE, R::R0, R::R1, "pass");
  // From the QP's peer (source address = peer GID)?
  for (int w = 0; w < 4; ++w) {
    a.ld_abs(BPF_W, kIp6Src + 4 * w);
    a.ldx(BPF_W, R::R1, R::R9, static_cast<int16_t>(kOffSlots + kSlotGid + 4 * w));
    a.jmp(BPF_JNE, R::R0, R::R1, "pass");
  }
}

// Trimmed (DSCP = traffic class >> 2): the engine NACKs trimmed data whatever their PSN and
// counts any other trimmed packet as a decode error. Clobbers R0-R5.
void pass_trimmed(Asm& a) {
  using R = Asm::Reg;
  a.ld_abs(BPF_H, kIp6Vtc);
  a.alui(BPF_RSH, R::R0, 6);
  a.alui(BPF_AND, R::R0, 0x3F);
  a.ldx(BPF_W, R::R1, R::R7, kOffDscpTrimmed);
  a.jmp(BPF_JEQ, R::R0, R::R1, "pass");
  a.ldx(BPF_W, R::R1, R::R7, kOffDscpTrimmedLastHop);
  a.jmp(BPF_JEQ, R::R0, R::R1, "pass");
}

// The program's body, judging one frame; reads it with a.ld_abs.
void build_body(Asm& a, int map_fd, const Verdicts& v) {
  using R = Asm::Reg;
  // What the classic filter of the ring accepted before: IPv6 UDP to the RoCE port, or an
  // outer IPv6-in-IPv6 / routing header (SRv6: passed whole, the engine decodes it).
  // A load beyond the frame ends the program with 0: not ours for the socket, TC_ACT_OK at tc.
  // The ring's socket is bound to IPv6; at tc every EtherType comes.
  a.ld_abs(BPF_H, kEthType);
  a.jmpi(BPF_JNE, R::R0, 0x86DD, "drop");
  a.ld_abs(BPF_B, kIp6Next);
  a.jmpi(BPF_JEQ, R::R0, 41, "pass");
  a.jmpi(BPF_JEQ, R::R0, 43, "pass");
  a.jmpi(BPF_JNE, R::R0, 17, "drop");
  a.map_value(R::R7, map_fd);
  a.ld_abs(BPF_H, kUdpDport);
  a.ldx(BPF_W, R::R1, R::R7, kOffRocePort);
  a.jmp(BPF_JNE, R::R0, R::R1, "drop");
  // From here on every frame is accepted unless refused below. To another GID (another
  // endpoint process on the interface): not ours to judge.
  a.ldx(BPF_W, R::R1, R::R7, kOffLocalGidSet);
  a.jmpi(BPF_JEQ, R::R1, 0, "to_us");
  for (int w = 0; w < 4; ++w) {
    a.ld_abs(BPF_W, kIp6Dst + 4 * w);
    a.ldx(BPF_W, R::R1, R::R7, static_cast<int16_t>(kOffLocalGid + 4 * w));
    a.jmp(BPF_JNE, R::R0, R::R1, "pass");
  }
  a.label("to_us");
  // Too short for a BTH -> engine.
  a.ldx(BPF_W, R::R1, R::R6, 0);  // __sk_buff.len
  a.jmpi(BPF_JLT, R::R1, kMinBthFrame, "pass");
  // Endpoint request? (bitmap test as below)
  a.ld_abs(BPF_B, kBthOpcode);
  bitmap_test(a, kOffEpBitmap);
  a.jmpi(BPF_JEQ, R::R3, 0, "data");
  a.ldx(BPF_W, R::R1, R::R6, 0);
  a.jmpi(BPF_JLT, R::R1, kMinErthFrame, "pass");
  a.ld_abs(BPF_W, kBthQpnWord);
  a.alui(BPF_AND, R::R0, 0xFFFFFF);
  a.jmpi(BPF_JNE, R::R0, static_cast<int32_t>(wire::kEndpointOpQpn), "pass");
  // The source's entry: R9 = map + kOffPeers + (last GID word % 16) * 32.
  a.ld_abs(BPF_W, kIp6Src + 12);
  a.alui(BPF_AND, R::R0, kPeers - 1);
  a.alui(BPF_MUL, R::R0, kPeerBytes);
  a.mov(R::R9, R::R7);
  a.alu(BPF_ADD, R::R9, R::R0);
  a.ldx(BPF_W, R::R1, R::R9, kOffPeers + kPeerMode);
  a.jmpi(BPF_JEQ, R::R1, 2, "pass");
  a.jmpi(BPF_JEQ, R::R1, 0, "stranger");
  for (int w = 0; w < 4; ++w) {
    a.ld_abs(BPF_W, kIp6Src + 4 * w);
    a.ldx(BPF_W, R::R1, R::R9, static_cast<int16_t>(kOffPeers + 4 * w));
    a.jmp(BPF_JNE, R::R0, R::R1, "stranger");
  }
  // A peer: only its EV probes are limited here; a port-status update changes state.
  a.ld_abs(BPF_B, kErthOp);
  a.alui(BPF_AND, R::R0, 3);
  a.jmpi(BPF_JNE, R::R0, static_cast<int32_t>(wire::EndpointOp::kEvProbe), "pass");
  a.alui(BPF_ADD, R::R9, kOffPeers + kPeerLastPass);
  a.mov(R::R8, R::R7);
  a.alui(BPF_ADD, R::R8, kBucketEpPeer);
  a.ja("bucket");
  // A node we have no QP with: one bucket for all of them (the engine stores nothing for them
  // and answers from one shared bucket).
  a.label("stranger");
  a.mov(R::R9, R::R7);
  a.alui(BPF_ADD, R::R9, kOffStrangerLast);
  a.mov(R::R8, R::R7);
  a.alui(BPF_ADD, R::R8, kBucketEpStranger);
  a.ja("bucket");

  a.label("data");
  // Data opcode?
  a.ld_abs(BPF_B, kBthOpcode);
  bitmap_test(a, kOffOpBitmap);
  a.jmpi(BPF_JEQ, R::R3, 0, "nack");
  pass_trimmed(a);
  slot_of_peer(a);
  // d = (psn - cack) mod 2^24: 0 or >= 2^23 is at or before the cumulative PSN.
  a.ld_abs(BPF_W, kBthPsnWord);
  a.alui(BPF_AND, R::R0, 0xFFFFFF);
  a.ldx(BPF_W, R::R1, R::R9, kOffSlots + kSlotCack);
  a.alu(BPF_SUB, R::R0, R::R1);
  a.alui(BPF_AND, R::R0, 0xFFFFFF);
  a.mov(R::R8, R::R7);
  a.alui(BPF_ADD, R::R8, kBucketDuplicates);
  a.jmpi(BPF_JEQ, R::R0, 0, "refuse");
  a.jmpi(BPF_JGE, R::R0, 1 << 23, "refuse");
  a.ldx(BPF_W, R::R1, R::R9, kOffSlots + kSlotLimit);
  a.jmp(BPF_JLE, R::R0, R::R1, "pass");
  a.alui(BPF_ADD, R::R8, kBucketOutOfWindow - kBucketDuplicates);
  a.label("refuse");
  // One refusable frame per sample gap and QP still reaches the engine (its reply bucket
  // decides whether it is answered): a peer that lost our SACKs learns the state again.
  a.alui(BPF_ADD, R::R9, kOffSlots + kSlotLastPass);
  // The bucket: R9 -> its theoretical arrival time, R8 -> its gap, tau and refusal count.
  a.label("bucket");
  a.call(BPF_FUNC_ktime_get_ns);
  a.ldx(BPF_DW, R::R1, R::R9, 0);  // theoretical arrival time
  a.ldx(BPF_DW, R::R2, R::R8, kBucketTau);
  a.alu(BPF_ADD, R::R2, R::R0);
  a.jmp(BPF_JGT, R::R1, R::R2, "over");
  a.jmp(BPF_JGE, R::R1, R::R0, "later");
  a.mov(R::R1, R::R0);
  a.label("later");
  a.ldx(BPF_DW, R::R3, R::R8, kBucketGap);
  a.alu(BPF_ADD, R::R1, R::R3);
  a.stx(BPF_DW, R::R9, R::R1, 0);
  a.movi(R::R1, 1);
  a.atomic_add64(R::R7, R::R1, kOffSampled);
  a.ja("pass");
  a.label("over");
  a.movi(R::R1, 1);
  a.atomic_add64(R::R8, R::R1, kBucketRefused);
  a.movi(R::R0, v.refused);
  a.exit();
  a.label("drop");
  a.movi(R::R0, v.not_ours);
  a.exit();

  // A NACK: refused when its PSN is not outstanding at the requester (see the top).
  a.label("nack");
  a.ld_abs(BPF_B, kBthOpcode);
  bitmap_test(a, kOffNackBitmap);
  a.jmpi(BPF_JEQ, R::R3, 0, "pass");
  a.ldx(BPF_W, R::R1, R::R6, 0);  // __sk_buff.len: too short for the NETH's PSN -> engine
  a.jmpi(BPF_JLT, R::R1, kMinNethFrame, "pass");
  pass_trimmed(a);
  slot_of_peer(a);
  a.ldx(BPF_W, R::R1, R::R9, kOffSlots + kSlotSndWindow);
  a.jmpi(BPF_JEQ, R::R1, 0, "pass");  // not sending (not RTS): the engine counts it
  // d = (NACK PSN - requester's cumulative ACK) mod 2^24: 0 or >= 2^23 is acknowledged.
  a.ld_abs(BPF_W, kNethPsnWord);
  a.alui(BPF_AND, R::R0, 0xFFFFFF);
  a.ldx(BPF_W, R::R1, R::R9, kOffSlots + kSlotSndCack);
  a.alu(BPF_SUB, R::R0, R::R1);
  a.alui(BPF_AND, R::R0, 0xFFFFFF);
  a.jmpi(BPF_JEQ, R::R0, 0, "nack_refuse");
  a.jmpi(BPF_JGE, R::R0, 1 << 23, "nack_refuse");
  a.ldx(BPF_W, R::R1, R::R9, kOffSlots + kSlotSndWindow);
  a.jmp(BPF_JLE, R::R0, R::R1, "pass");
  a.label("nack_refuse");
  a.movi(R::R1, 1);
  a.atomic_add64(R::R7, R::R1, kOffNacksRefused);
  a.movi(R::R0, v.refused);
  a.exit();

  a.label("pass");
  a.movi(R::R0, v.pass);
  a.exit();
}

std::vector<bpf_insn> build_program(int map_fd, const Verdicts& v) {
  using R = Asm::Reg;
  Asm a;
  a.mov(R::R6, R::R1);  // BPF_LD_ABS reads the packet through R6
  // Every BPF_LD_ABS is a helper call, and a frame sent through AF_PACKET (the peer's data and
  // an attacker's alike) arrives with only its Ethernet and IPv6 headers in the skb's linear
  // area: each load beyond them took the helper's skb_copy_bits path, about twenty per frame
  // (perf during an old-psn flood: most of the program's samples, 300-430 ns per run by the
  // kernel's bpf_stats). A frame that holds all kHeaderBytes is copied to the stack with one
  // bpf_skb_load_bytes and judged from there; the copy starts 2 bytes into an 8-aligned slot
  // so that the IPv6 addresses and the BTH words are 4-aligned (the verifier refuses
  // misaligned stack loads). A shorter frame, or a failed copy, is judged by the same body
  // reading the frame with BPF_LD_ABS, whose loads beyond the frame end the program as before.
  a.ldx(BPF_W, R::R2, R::R6, 0);  // __sk_buff.len
  a.jmpi(BPF_JLT, R::R2, kHeaderBytes, "by_ld_abs");
  a.mov(R::R1, R::R6);
  a.movi(R::R2, 0);
  a.mov(R::R3, R::R10);
  a.alui(BPF_ADD, R::R3, Asm::stack_frame_);
  a.movi(R::R4, kHeaderBytes);
  a.call(BPF_FUNC_skb_load_bytes);
  a.jmpi(BPF_JNE, R::R0, 0, "by_ld_abs");
  a.body(true, "stack_");
  build_body(a, map_fd, v);
  a.body(false, "");
  a.label("by_ld_abs");
  a.body(false, "ld_abs_");
  build_body(a, map_fd, v);
  return a.finish();
}

// Loads `prog` as `type`; empty Fd and `why_not` when the kernel refuses it.
Fd load_insns(const std::vector<bpf_insn>& prog, bpf_prog_type type, std::string& why_not) {
  static const char kLicense[] = "Dual BSD/GPL";
  std::vector<char> log(65536);
  bpf_attr attr{};
  attr.prog_type = type;
  attr.insns = reinterpret_cast<uint64_t>(prog.data());
  attr.insn_cnt = static_cast<uint32_t>(prog.size());
  attr.license = reinterpret_cast<uint64_t>(kLicense);
  attr.log_buf = reinterpret_cast<uint64_t>(log.data());
  attr.log_size = static_cast<uint32_t>(log.size());
  attr.log_level = 1;
  Fd fd(sys_bpf(BPF_PROG_LOAD, attr));
  if (!fd.ok()) {
    const int e = errno;
    std::string tail(log.data());
    if (tail.size() > 400) tail = tail.substr(tail.size() - 400);
    why_not = std::string("bpf(BPF_PROG_LOAD): ") + std::strerror(e) +
              (tail.empty() ? "" : " (verifier: " + tail + ")");
  }
  return fd;
}

Fd load_program(int map_fd, bpf_prog_type type, const Verdicts& v, std::string& why_not) {
  return load_insns(build_program(map_fd, v), type, why_not);
}

// tc ingress through a BPF link; the link's fd holds the attachment.
bool attach_tcx_ingress(int prog_fd, int ifindex, std::vector<Fd>& links, std::string& why_not) {
  bpf_attr attr{};
  attr.link_create.prog_fd = static_cast<uint32_t>(prog_fd);
  attr.link_create.target_ifindex = static_cast<uint32_t>(ifindex);
  attr.link_create.attach_type = kBpfTcxIngress;
  Fd link(sys_bpf(BPF_LINK_CREATE, attr));
  if (!link.ok()) {
    why_not = std::string("bpf(BPF_LINK_CREATE, tcx ingress): ") + std::strerror(errno);
    return false;
  }
  links.push_back(std::move(link));
  return true;
}

// The ingress sink (IngressSink, sys.h). It runs at tc ingress after the taps: every frame it
// ends was already offered to the rings, whose filter judged it (a ring that refused it or had
// no room lost it as before; the stack would only have handed it to the sink socket, which
// drops everything). It ends a frame only when all of these hold, read from one copy of the
// headers on the stack:
//  - EtherType IPv6, destination address = the endpoint's GID, next header UDP, destination
//    port = the wire profile's RoCE port: what the sink socket would have dropped; or
//  - next header IPv6-in-IPv6 (an SRv6 uSID frame without SRH, whatever its outer address)
//    whose inner header is that: the host's End.DT6 would decapsulate it and hand it to the
//    sink socket.
// Anything else (ND, the TCP control channel, other addresses, other ports, a routing header,
// fragments, frames too short to read) goes on with TC_ACT_UNSPEC: the next tc program, if
// any, and the stack decide, as without this program. Header bytes are compared in wire
// order (native loads of the copy against native images of the wire bytes, 32-bit compares).
constexpr uint32_t kSinkOuterBytes = 58;                      // Ethernet + IPv6 + UDP ports
constexpr uint32_t kSinkInnerOff = 54, kSinkInnerBytes = 44;  // inner IPv6 + UDP ports
constexpr int16_t kSinkOuterStack = -62;  // 2 bytes into an 8-aligned slot: IPv6 words aligned
constexpr int16_t kSinkInnerStack = -112;

int32_t native_image(std::span<const uint8_t> wire_bytes) {
  uint32_t v = 0;
  std::memcpy(&v, wire_bytes.data(), wire_bytes.size());
  return static_cast<int32_t>(v);
}

std::vector<bpf_insn> build_sink_program(uint16_t roce_port, const wire::Ipv6Addr& gid) {
  using R = Asm::Reg;
  Asm a;
  const uint8_t eth_ipv6[2] = {0x86, 0xDD};
  const uint8_t port[2] = {static_cast<uint8_t>(roce_port >> 8),
                           static_cast<uint8_t>(roce_port & 0xFF)};
  // Ends the frame when the IPv6 header copied at `hdr` on the stack (its UDP ports behind it)
  // is UDP to the GID's RoCE port; else on to "next".
  const auto udp_to_us = [&](int16_t hdr) {
    a.ldx(BPF_B, R::R0, R::R10, static_cast<int16_t>(hdr + 6));
    a.jmp32i(BPF_JNE, R::R0, 17, "next");
    for (int w = 0; w < 4; ++w) {
      a.ldx(BPF_W, R::R0, R::R10, static_cast<int16_t>(hdr + 24 + 4 * w));
      a.jmp32i(BPF_JNE, R::R0, native_image(std::span<const uint8_t>(gid.data() + 4 * w, 4)),
               "next");
    }
    a.ldx(BPF_H, R::R0, R::R10, static_cast<int16_t>(hdr + 42));
    a.jmp32i(BPF_JNE, R::R0, native_image(port), "next");
    a.ja("end");
  };
  a.mov(R::R6, R::R1);
  a.ldx(BPF_W, R::R7, R::R6, 0);  // __sk_buff.len
  a.jmpi(BPF_JLT, R::R7, kSinkOuterBytes, "next");
  a.mov(R::R1, R::R6);
  a.movi(R::R2, 0);
  a.mov(R::R3, R::R10);
  a.alui(BPF_ADD, R::R3, kSinkOuterStack);
  a.movi(R::R4, kSinkOuterBytes);
  a.call(BPF_FUNC_skb_load_bytes);
  a.jmpi(BPF_JNE, R::R0, 0, "next");
  a.ldx(BPF_H, R::R0, R::R10, kSinkOuterStack + 12);
  a.jmp32i(BPF_JNE, R::R0, native_image(eth_ipv6), "next");
  a.ldx(BPF_B, R::R0, R::R10, kSinkOuterStack + 20);
  a.jmpi(BPF_JEQ, R::R0, 41, "inner");
  udp_to_us(kSinkOuterStack + 14);
  a.label("inner");
  a.jmpi(BPF_JLT, R::R7, kSinkInnerOff + kSinkInnerBytes, "next");
  a.mov(R::R1, R::R6);
  a.movi(R::R2, kSinkInnerOff);
  a.mov(R::R3, R::R10);
  a.alui(BPF_ADD, R::R3, kSinkInnerStack);
  a.movi(R::R4, kSinkInnerBytes);
  a.call(BPF_FUNC_skb_load_bytes);
  a.jmpi(BPF_JNE, R::R0, 0, "next");
  a.ldx(BPF_B, R::R0, R::R10, kSinkInnerStack);
  a.alui(BPF_RSH, R::R0, 4);
  a.jmpi(BPF_JNE, R::R0, 6, "next");  // inner IP version
  udp_to_us(kSinkInnerStack);
  a.label("end");
  a.movi(R::R0, TC_ACT_SHOT);
  a.exit();
  a.label("next");
  a.movi(R::R0, TC_ACT_UNSPEC);
  a.exit();
  return a.finish();
}

uint32_t be_word(const wire::Ipv6Addr& a, int w) {
  const auto b = [&](int i) { return static_cast<uint32_t>(a[static_cast<size_t>(4 * w + i)]); };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

// One run of `prog_fd` on `in` (BPF_PROG_TEST_RUN): its return value, or -errno.
int64_t test_run(int prog_fd, std::vector<std::byte>& in) {
  bpf_attr attr{};
  attr.test.prog_fd = static_cast<uint32_t>(prog_fd);
  attr.test.data_in = reinterpret_cast<uint64_t>(in.data());
  attr.test.data_size_in = static_cast<uint32_t>(in.size());
  attr.test.repeat = 1;
  if (sys_bpf(BPF_PROG_TEST_RUN, attr) < 0) return -errno;
  return attr.test.retval;
}

}  // namespace

RxFilter::~RxFilter() {
  if (shared_ != nullptr) munmap(shared_, shared_bytes_);
}

std::unique_ptr<RxFilter> RxFilter::create(const wire::WireProfile& profile, const Gaps& gaps,
                                           std::string& why_not) {
  std::unique_ptr<RxFilter> f(new RxFilter());
  bpf_attr attr{};
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = kValueBytes;
  attr.max_entries = 1;
  attr.map_flags = BPF_F_MMAPABLE;
  f->map_ = Fd(sys_bpf(BPF_MAP_CREATE, attr));
  if (!f->map_.ok()) {
    why_not = std::string("bpf(BPF_MAP_CREATE): ") + std::strerror(errno);
    return nullptr;
  }
  const long page = sysconf(_SC_PAGESIZE);
  f->shared_bytes_ = (kValueBytes + static_cast<size_t>(page) - 1) / static_cast<size_t>(page) *
                     static_cast<size_t>(page);
  void* m = mmap(nullptr, f->shared_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, f->map_.get(), 0);
  if (m == MAP_FAILED) {
    why_not = std::string("mmap of the filter map: ") + std::strerror(errno);
    return nullptr;
  }
  f->shared_ = static_cast<std::byte*>(m);
  // The constants the program reads before it is attached anywhere.
  for (unsigned op = 0; op < 256; ++op) {
    const wire::OpcodeInfo* info = profile.opcode_info(static_cast<uint8_t>(op));
    if (info == nullptr || info->kind != wire::PacketKind::kMrcData) continue;
    f->word(kOffOpBitmap + 4 * static_cast<int>(op / 32)) |= 1u << (op % 32);
  }
  f->word(kOffDscpTrimmed) = profile.dscp().trimmed;
  f->word(kOffDscpTrimmedLastHop) = profile.dscp().trimmed_lasthop;
  f->word(kOffRocePort) = profile.roce_port();
  const auto bucket = [&](int off, uint64_t gap_ns, uint32_t burst) {
    f->dword(off + kBucketGap) = gap_ns;
    f->dword(off + kBucketTau) = gap_ns * (std::max<uint32_t>(burst, 1) - 1);
  };
  bucket(kBucketDuplicates, gaps.reply_ns, gaps.reply_burst);
  bucket(kBucketOutOfWindow, gaps.reply_ns, gaps.reply_burst);
  bucket(kBucketEpPeer, gaps.ep_peer_ns, gaps.ep_burst);
  bucket(kBucketEpStranger, gaps.ep_stranger_ns, gaps.ep_burst);
  for (unsigned op = 0; op < 256; ++op) {
    const wire::OpcodeInfo* info = profile.opcode_info(static_cast<uint8_t>(op));
    if (info == nullptr) continue;
    if (info->kind == wire::PacketKind::kMrcEndpointRequest)
      f->word(kOffEpBitmap + 4 * static_cast<int>(op / 32)) |= 1u << (op % 32);
    // Only NACKs whose NETH sits right behind the BTH (where the program reads the PSN).
    if (info->kind == wire::PacketKind::kMrcNack && info->headers == wire::kHdrNeth)
      f->word(kOffNackBitmap + 4 * static_cast<int>(op / 32)) |= 1u << (op % 32);
  }

  f->prog_ = load_program(f->map_.get(), BPF_PROG_TYPE_SOCKET_FILTER, kSocketVerdicts, why_not);
  if (!f->prog_.ok()) return nullptr;
  // The tc variant is optional: without it the socket filter does the work.
  std::string tc_why;
  f->tc_prog_ = load_program(f->map_.get(), BPF_PROG_TYPE_SCHED_CLS, kTcVerdicts, tc_why);
  return f;
}

bool RxFilter::attach_ingress(int ifindex, std::string& why_not) {
  if (!tc_prog_.ok()) {
    why_not = "no tc program";
    return false;
  }
  return attach_tcx_ingress(tc_prog_.get(), ifindex, links_, why_not);
}

void RxFilter::detach_ingress() {
  links_.clear();
}

uint32_t& RxFilter::word(int off) {
  return *reinterpret_cast<uint32_t*>(shared_ + off);
}
uint64_t& RxFilter::dword(int off) {
  return *reinterpret_cast<uint64_t*>(shared_ + off);
}

void RxFilter::set_local_gid(const wire::Ipv6Addr& gid) {
  __atomic_store_n(&word(kOffLocalGidSet), 0u, __ATOMIC_RELEASE);
  for (int w = 0; w < 4; ++w)
    __atomic_store_n(&word(kOffLocalGid + 4 * w), be_word(gid, w), __ATOMIC_RELAXED);
  __atomic_store_n(&word(kOffLocalGidSet), 1u, __ATOMIC_RELEASE);
}

void RxFilter::publish(std::span<const engine::RxGate> gates) {
  publish_peers(gates);
  // Wanted contents of each slot; a QP whose slot another QP took stays unfiltered.
  std::array<const engine::RxGate*, kSlots> want{};
  for (const engine::RxGate& g : gates) {
    const engine::RxGate*& w = want[g.qpn % kSlots];
    if (w == nullptr) w = &g;
  }
  for (uint32_t s = 0; s < kSlots; ++s) {
    const int base = kOffSlots + static_cast<int>(s) * kSlotBytes;
    uint32_t* qpn1 = &word(base + kSlotQpn);
    const engine::RxGate* g = want[s];
    const uint32_t have = __atomic_load_n(qpn1, __ATOMIC_RELAXED);
    if (g == nullptr) {
      if (have != 0) __atomic_store_n(qpn1, 0u, __ATOMIC_RELEASE);
      continue;
    }
    const uint32_t limit = 2 * g->rcv_window;
    uint32_t* cack = &word(base + kSlotCack);
    uint32_t* snd_cack = &word(base + kSlotSndCack);
    if (have == g->qpn + 1 && published_[s] == g->peer_gid && word(base + kSlotLimit) == limit &&
        word(base + kSlotSndWindow) == g->snd_window &&
        wire::psn_le(__atomic_load_n(cack, __ATOMIC_RELAXED), g->rcv_cack) &&
        wire::psn_le(__atomic_load_n(snd_cack, __ATOMIC_RELAXED), g->snd_cack)) {
      // The same QP moving on: the cumulative PSNs only grow.
      __atomic_store_n(cack, g->rcv_cack, __ATOMIC_RELEASE);
      __atomic_store_n(snd_cack, g->snd_cack, __ATOMIC_RELEASE);
      continue;
    }
    // Another QP, peer or window (or a PSN that went back: a QP created again under the same
    // number): empty the slot, fill it, then name the QP.
    __atomic_store_n(qpn1, 0u, __ATOMIC_RELEASE);
    __atomic_store_n(cack, g->rcv_cack, __ATOMIC_RELAXED);
    __atomic_store_n(&word(base + kSlotLimit), limit, __ATOMIC_RELAXED);
    __atomic_store_n(snd_cack, g->snd_cack, __ATOMIC_RELAXED);
    __atomic_store_n(&word(base + kSlotSndWindow), g->snd_window, __ATOMIC_RELAXED);
    for (int w = 0; w < 4; ++w)
      __atomic_store_n(&word(base + kSlotGid + 4 * w), be_word(g->peer_gid, w), __ATOMIC_RELAXED);
    published_[s] = g->peer_gid;
    __atomic_store_n(qpn1, g->qpn + 1, __ATOMIC_RELEASE);
  }
}

void RxFilter::publish_peers(std::span<const engine::RxGate> gates) {
  std::array<uint32_t, kPeers> mode{};
  std::array<wire::Ipv6Addr, kPeers> gid{};
  for (const engine::RxGate& g : gates) {
    const uint32_t i = be_word(g.peer_gid, 3) % kPeers;
    if (mode[i] == 0) {
      mode[i] = 1;
      gid[i] = g.peer_gid;
    } else if (gid[i] != g.peer_gid) {
      mode[i] = 2;
    }
  }
  for (uint32_t i = 0; i < kPeers; ++i) {
    const int base = kOffPeers + static_cast<int>(i) * kPeerBytes;
    uint32_t* m = &word(base + kPeerMode);
    if (mode[i] == __atomic_load_n(m, __ATOMIC_RELAXED) && (mode[i] != 1 || peers_[i] == gid[i]))
      continue;
    // Passing everything while the entry changes: a peer is never taken for a stranger.
    __atomic_store_n(m, 2u, __ATOMIC_RELEASE);
    for (int w = 0; w < 4; ++w)
      __atomic_store_n(&word(base + 4 * w), be_word(gid[i], w), __ATOMIC_RELAXED);
    peers_[i] = gid[i];
    __atomic_store_n(m, mode[i], __ATOMIC_RELEASE);
  }
}

RxFilter::Counts RxFilter::counts() const {
  auto rd = [&](int off) {
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(shared_ + off), __ATOMIC_RELAXED);
  };
  Counts c;
  c.duplicates = rd(kBucketDuplicates + kBucketRefused);
  c.out_of_window = rd(kBucketOutOfWindow + kBucketRefused);
  c.ep_peer_limited = rd(kBucketEpPeer + kBucketRefused);
  c.ep_stranger_limited = rd(kBucketEpStranger + kBucketRefused);
  c.sampled = rd(kOffSampled);
  c.nacks_not_outstanding = rd(kOffNacksRefused);
  return c;
}

std::vector<uint64_t> RxFilter::program_for_test(bool tc) {
  const std::vector<bpf_insn> prog = build_program(-1, tc ? kTcVerdicts : kSocketVerdicts);
  std::vector<uint64_t> out(prog.size());
  static_assert(sizeof(bpf_insn) == sizeof(uint64_t));
  std::memcpy(out.data(), prog.data(), prog.size() * sizeof(bpf_insn));
  return out;
}

std::unique_ptr<IngressSink> IngressSink::create(uint16_t roce_port, const wire::Ipv6Addr& gid,
                                                 std::string& why_not) {
  std::unique_ptr<IngressSink> s(new IngressSink());
  s->prog_ = load_insns(build_sink_program(roce_port, gid), BPF_PROG_TYPE_SCHED_CLS, why_not);
  if (!s->prog_.ok()) return nullptr;
  return s;
}

bool IngressSink::attach(int ifindex, std::string& why_not) {
  return attach_tcx_ingress(prog_.get(), ifindex, links_, why_not);
}

int IngressSink::run_on(std::span<const std::byte> frame, int32_t& verdict) const {
  std::vector<std::byte> in(frame.begin(), frame.end());
  const int64_t r = test_run(prog_.get(), in);
  if (r < 0) return static_cast<int>(r);
  verdict = static_cast<int32_t>(r);
  return 0;
}

int64_t RxFilter::run_on(std::span<const std::byte> frame, bool tc) const {
  // For a socket filter the test run consumes an Ethernet header (eth_type_trans) and starts the
  // program behind it, where a packet socket starts it at the frame's own Ethernet header: a
  // header in front of the frame puts the frame where the ring's filter sees it. A tc program
  // is started at the Ethernet header, as at ingress.
  const size_t pad = tc ? 0 : 14;
  std::vector<std::byte> in(pad + frame.size());
  std::memcpy(in.data() + pad, frame.data(), frame.size());
  if (tc && !tc_prog_.ok()) return -ENOENT;
  return test_run(tc ? tc_prog_.get() : prog_.get(), in);
}

}  // namespace mrc::runtime
