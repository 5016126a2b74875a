// Flat-out AF_PACKET sender of one 4154-byte IPv6/UDP frame: how long N frames take, pinned.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
int main(int argc, char** argv) {
  const char* ifn = argv[1];
  long n = atol(argv[2]);
  int len = argc > 3 ? atoi(argv[3]) : 4154;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(1, &s);
  sched_setaffinity(0, sizeof s, &s);
  int fd = socket(AF_PACKET, SOCK_RAW, 0);
  int one = 1;
  setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
  struct sockaddr_ll a = {0};
  a.sll_family = AF_PACKET;
  a.sll_ifindex = if_nametoindex(ifn);
  a.sll_halen = 6;
  if (bind(fd, (struct sockaddr*)&a, sizeof a)) {
    perror("bind");
    return 1;
  }
  static unsigned char f[9000];
  memset(f, 0xab, sizeof f);
  memset(f, 0xff, 6);
  f[6] = 2;
  f[7] = 0;
  f[8] = 0;
  f[9] = 0;
  f[10] = 0;
  f[11] = 1;
  f[12] = 0x86;
  f[13] = 0xdd;
  unsigned char* ip = f + 14;
  ip[0] = 0x60;
  ip[1] = 0;
  ip[2] = 0;
  ip[3] = 0;
  int pl = len - 14 - 40;
  ip[4] = pl >> 8;
  ip[5] = pl & 255;
  ip[6] = 17;
  ip[7] = 64;
  inet_pton(AF_INET6, "fd00:99::1", ip + 8);
  inet_pton(AF_INET6, "fd00:99::2", ip + 24);
  unsigned char* u = ip + 40;
  u[0] = 0xc0;
  u[1] = 0;
  u[2] = 0x12;
  u[3] = 0xb7;
  u[4] = pl >> 8;
  u[5] = pl & 255;
  u[6] = 0;
  u[7] = 0;
  enum { B = 64 };
  struct mmsghdr m[B];
  struct iovec io[B];
  for (int i = 0; i < B; ++i) {
    io[i].iov_base = f;
    io[i].iov_len = len;
    memset(&m[i], 0, sizeof m[i]);
    m[i].msg_hdr.msg_iov = &io[i];
    m[i].msg_hdr.msg_iovlen = 1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long sent = 0, fail = 0;
  while (sent < n) {
    int r = sendmmsg(fd, m, B, 0);
    if (r < 0) {
      fail++;
      if (fail > 1000000) break;
      continue;
    }
    sent += r;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double el = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
  printf("sent %ld fail %ld wall %.3f s  %.0f ns/frame  proc-cpu %.3f s\n", sent, fail, el,
         el * 1e9 / sent, cpu);
  return 0;
}
