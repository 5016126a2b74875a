// The AF_PACKET transmit ring (PacketRingTx) on veth pairs in a private network namespace: the
// test thread unshares its own namespace (nothing named, nothing left behind), frames go out of
// t0 / u0 and are read back with AF_PACKET sockets on the peers t1 / u1. Root only.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "reference-impl/runtime/sys.h"

namespace mrc::runtime {
namespace {

// A local experimental EtherType: nothing else the kernel sends on the veths carries it.
constexpr uint16_t kTestEtherType = 0x88b5;

// Runs body in a thread with a network namespace of its own (unshare is per thread; commands
// forked from that thread inherit it). The namespace goes away with its last socket.
void in_private_netns(const std::function<void()>& body) {
  std::thread th([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      ADD_FAILURE() << "unshare(CLONE_NEWNET): " << std::strerror(errno);
      return;
    }
    body();
  });
  th.join();
}

bool run(const std::string& cmd) {
  const int rc = std::system((cmd + " > /dev/null 2>&1").c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return rc == 0;
}

// A receiving AF_PACKET socket on one interface, test EtherType only.
int open_rx(const char* iface) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(kTestEtherType));
  EXPECT_GE(fd, 0) << std::strerror(errno);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(kTestEtherType);
  sll.sll_ifindex = static_cast<int>(if_nametoindex(iface));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll), 0) << std::strerror(errno);
  return fd;
}

// Frame number seq, length len: Ethernet header with the test EtherType, then the number, then
// a pattern of it.
std::vector<std::byte> make_frame(uint32_t seq, size_t len) {
  std::vector<std::byte> f(len);
  for (size_t i = 0; i < 12; ++i) f[i] = std::byte{0x02};
  f[12] = std::byte{kTestEtherType >> 8};
  f[13] = std::byte{kTestEtherType & 0xff};
  std::memcpy(f.data() + 14, &seq, 4);
  for (size_t i = 18; i < len; ++i) f[i] = static_cast<std::byte>((seq * 7 + i) & 0xff);
  return f;
}

// Everything queued on fd now (veth delivers within the sender's system call).
std::vector<std::vector<std::byte>> drain(int fd) {
  std::vector<std::vector<std::byte>> out;
  std::vector<std::byte> buf(16384);
  for (;;) {
    const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) break;
    out.emplace_back(buf.begin(), buf.begin() + n);
  }
  return out;
}

bool is_root() {
  return geteuid() == 0;
}

// Short batches, runs alternating between two interfaces, and more frames than the ring has
// slots: every frame leaves once, on its own interface, in order, byte for byte; whatever a full
// ring pushes back goes with a later send.
TEST(PacketRingTx, WrapsShortBatchesAndKeepsOrderPerInterface) {
  if (!is_root()) GTEST_SKIP() << "needs root (network namespace, AF_PACKET)";
  in_private_netns([] {
    if (!run("ip link add t0 mtu 9000 type veth peer name t1 mtu 9000") ||
        !run("ip link add u0 mtu 9000 type veth peer name u1 mtu 9000"))
      return;
    for (const char* i : {"t0", "t1", "u0", "u1"})
      if (!run(std::string("ip link set ") + i + " up")) return;
    const int rx_t = open_rx("t1"), rx_u = open_rx("u1");
    const int t0 = static_cast<int>(if_nametoindex("t0")),
              u0 = static_cast<int>(if_nametoindex("u0"));
    std::unique_ptr<TxIo> tx;
    Status st = open_packet_ring_tx(16, 4096, 64, tx);
    ASSERT_TRUE(st.ok()) << st.message;

    std::mt19937 rng(19);
    std::vector<std::vector<std::byte>> frames;
    std::vector<int> ifindex;
    for (uint32_t s = 0; s < 600; ++s) {
      // Runs of 1..20 frames per interface; lengths from the minimum to a full slot's payload.
      if (s == 0 || rng() % 4 == 0)
        ifindex.push_back(rng() % 2 ? t0 : u0);
      else
        ifindex.push_back(ifindex.back());
      frames.push_back(make_frame(s, 60 + rng() % (4096 - 32 - 60)));
    }
    std::map<int, std::deque<uint32_t>> expect;
    for (uint32_t s = 0; s < frames.size(); ++s) expect[ifindex[s]].push_back(s);

    std::map<int, std::vector<std::vector<std::byte>>> got;
    auto collect = [&] {
      for (auto& f : drain(rx_t)) got[t0].push_back(std::move(f));
      for (auto& f : drain(rx_u)) got[u0].push_back(std::move(f));
    };
    size_t next = 0, pushed_back = 0;
    while (next < frames.size()) {
      const size_t want = std::min<size_t>(1 + rng() % 23, frames.size() - next);
      std::vector<TxItem> items(want);
      for (size_t i = 0; i < want; ++i) {
        items[i].frame = frames[next + i];
        items[i].ifindex = ifindex[next + i];
      }
      const int r = tx->send(items);
      ASSERT_GE(r, 0) << std::strerror(-r);
      ASSERT_LE(static_cast<size_t>(r), want);
      if (static_cast<size_t>(r) < want) ++pushed_back;
      next += static_cast<size_t>(r);
      // Read only now and then, so that the ring fills and wraps with slots still in flight.
      if (r == 0 || rng() % 3 == 0) collect();
    }
    collect();
    // veth copies a ring frame's pages when it forwards the skb (skb_orphan_frags), so slots come
    // back within the kick and the ring rarely fills here; RefusedRunLeavesNoStaleSlots covers
    // the push-back path. 600 frames through 16 slots wrap the ring 37 times.
    std::printf("[ info ] %zu frames, %llu kicks, %zu sends pushed back\n", frames.size(),
                static_cast<unsigned long long>(tx->syscalls), pushed_back);
    EXPECT_LT(tx->syscalls, frames.size()) << "one kick per frame: no batching";
    for (int ifi : {t0, u0}) {
      ASSERT_EQ(got[ifi].size(), expect[ifi].size()) << "ifindex " << ifi;
      for (size_t i = 0; i < got[ifi].size(); ++i) {
        const uint32_t s = expect[ifi][i];
        ASSERT_EQ(got[ifi][i], frames[s])
            << "ifindex " << ifi << " frame " << i << " (seq " << s << ")";
      }
    }
    close(rx_t);
    close(rx_u);
  });
}

// A plane without carrier refuses its run (ENOBUFS): the frames are reported unsent, and the
// slots they had taken do not go out later with the next run on another interface.
TEST(PacketRingTx, RefusedRunLeavesNoStaleSlots) {
  if (!is_root()) GTEST_SKIP() << "needs root (network namespace, AF_PACKET)";
  in_private_netns([] {
    if (!run("ip link add t0 type veth peer name t1") ||
        !run("ip link add v0 type veth peer name v1"))
      return;
    // v0 is up, its peer down: no carrier.
    for (const char* i : {"t0", "t1", "v0"})
      if (!run(std::string("ip link set ") + i + " up")) return;
    const int rx_t = open_rx("t1");
    const int t0 = static_cast<int>(if_nametoindex("t0")),
              v0 = static_cast<int>(if_nametoindex("v0"));
    std::unique_ptr<TxIo> tx;
    Status st = open_packet_ring_tx(16, 4096, 64, tx);
    ASSERT_TRUE(st.ok()) << st.message;
    std::vector<std::vector<std::byte>> f;
    for (uint32_t s = 0; s < 12; ++s) f.push_back(make_frame(s, 200));

    // f0..f3 on t0, then f4..f7 on v0 (runs of 4: the ring, not sendmmsg): the first run
    // leaves, the second is refused.
    std::vector<TxItem> a;
    for (size_t i = 0; i < 8; ++i) a.push_back({f[i], i < 4 ? t0 : v0, {}});
    const uint64_t kicks = tx->syscalls;
    EXPECT_EQ(tx->send(a), 4);
    EXPECT_EQ(tx->syscalls - kicks, 2u) << "not one kick per run";
    EXPECT_EQ(tx->blocked, 1u);
    // The caller drops them (as the loop does for a port without carrier) and goes on.
    std::vector<TxItem> b = {{f[8], t0, {}}};
    EXPECT_EQ(tx->send(b), 1);
    std::vector<TxItem> c = {{f[9], t0, {}}, {f[10], t0, {}}};
    EXPECT_EQ(tx->send(c), 2);
    const auto got = drain(rx_t);
    ASSERT_EQ(got.size(), 7u) << "frames of the refused run went out on t0";
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], f[i]);
    EXPECT_EQ(got[4], f[8]);
    EXPECT_EQ(got[5], f[9]);
    EXPECT_EQ(got[6], f[10]);

    // Frames alternating interfaces go through sendmmsg, one call for the batch.
    std::vector<TxItem> alt = {{f[11], t0, {}}, {f[0], v0, {}}, {f[1], t0, {}}};
    const uint64_t calls = tx->syscalls;
    EXPECT_EQ(tx->send(alt), 1);  // v0 pushes back
    EXPECT_EQ(tx->syscalls - calls, 1u);
    const auto got_alt = drain(rx_t);
    ASSERT_EQ(got_alt.size(), 1u);
    EXPECT_EQ(got_alt[0], f[11]);

    // A frame larger than a slot is a hard error of that frame alone.
    const std::vector<std::byte> big = make_frame(99, 4096);
    std::vector<TxItem> d = {{big, t0, {}}};
    EXPECT_EQ(tx->send(d), -EMSGSIZE);
    std::vector<TxItem> e = {{f[7], t0, {}}, {f[7], t0, {}}, {f[7], t0, {}}, {big, t0, {}}};
    EXPECT_EQ(tx->send(e), 3);
    // One the kernel refuses (it fits the slot but not t0's MTU of 1500: TP_STATUS_WRONG_FORMAT
    // on its slot) likewise, and its slot does not block the ring afterwards.
    const std::vector<std::byte> over_mtu = make_frame(98, 2000);
    std::vector<TxItem> g = {{over_mtu, t0, {}}};
    EXPECT_EQ(tx->send(g), -EMSGSIZE);
    std::vector<TxItem> h = {{f[1], t0, {}}};
    EXPECT_EQ(tx->send(h), 1);
    const auto got2 = drain(rx_t);
    ASSERT_EQ(got2.size(), 4u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got2[i], f[7]);
    EXPECT_EQ(got2[3], f[1]);
    close(rx_t);
  });
}

}  // namespace
}  // namespace mrc::runtime
