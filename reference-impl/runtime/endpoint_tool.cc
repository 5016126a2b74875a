// Stand-alone `mrc_endpoint ROLE [options]`, the same tool as `mrct endpoint`.
#include "reference-impl/runtime/runtime.h"

int main(int argc, char** argv) {
  return mrc::runtime::endpoint_main(argc, argv);
}
