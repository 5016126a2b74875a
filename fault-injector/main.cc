// mrc-inject: the fault injector as a stand-alone tool (mrct inject wraps the same entry point).
#include "fault-injector/faults.h"

int main(int argc, char** argv) {
  return mrc::faults::inject_main(argc, argv);
}
