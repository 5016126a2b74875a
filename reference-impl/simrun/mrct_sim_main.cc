// mrct-sim: `mrct sim` as a program of its own (benchmark builds).
#include "reference-impl/simrun/simrun.h"

int main(int argc, char** argv) {
  return mrc::simrun::sim_main(argc, argv);
}
