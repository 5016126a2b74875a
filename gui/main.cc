// mrct-view: the MRC capture viewer (see gui/view_main.h).
#include "gui/view_main.h"

int main(int argc, char** argv) {
  return mrc::view::view_main(argc, argv);
}
