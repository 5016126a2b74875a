// Shared between the suite's runner and its tests (not part of the public header).
#pragma once

#include <span>
#include <string>

#include "conformance/api/api_suite.h"
#include "conformance/api/binding.h"

namespace mrc::api {

// What a test throws to end with a status other than pass.
struct Outcome {
  Status status;
  std::string detail;
};

// What a test gets in its child: the bound library and the device asked for.
struct Fixture {
  const Api& api;
  std::string device;
};

// Two-node tests: the same test function runs in two children, node A (the library under test,
// --lib) and node B (--peer-lib), each in its own network namespace; a socketpair joins them
// for what a real application exchanges out of band (QPNs, GIDs, addresses, rkeys) and for
// phase barriers. A peer that dies or falls silent fails the test, naming the wait.
class Link {
 public:
  Link(int fd, int node) : fd_(fd), node_(node) {}
  int node() const { return node_; }  // 0: node A (--lib), 1: node B (--peer-lib)
  char name() const { return node_ == 0 ? 'A' : 'B'; }
  void send(const void* p, size_t n) const;
  // Reads exactly n bytes within `seconds`; fails the test on EOF or timeout, naming `what`.
  void recv(void* p, size_t n, const char* what, double seconds = 20) const;
  template <class T>
  T swap(const T& mine, const char* what, double seconds = 20) const {
    send(&mine, sizeof mine);
    T theirs;
    recv(&theirs, sizeof theirs, what, seconds);
    return theirs;
  }
  void sync(const char* what, double seconds = 20) const { swap<char>('s', what, seconds); }
  // Waits until the peer's end closes (its process ended); false after `seconds`.
  bool wait_gone(double seconds) const;

 private:
  int fd_;
  int node_;
};

struct TestDef {
  TestInfo info;
  void (*fn)(Fixture&);
  void (*fn2)(Fixture&, Link&) = nullptr;  // set (and fn null) for a two-node test
};

std::span<const TestDef> test_defs();

}  // namespace mrc::api
