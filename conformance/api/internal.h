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

struct TestDef {
  TestInfo info;
  void (*fn)(Fixture&);
};

std::span<const TestDef> test_defs();

}  // namespace mrc::api
