// Subcommands whose whole command line belongs to their library (inject, endpoint, view): mrct
// only forwards the arguments, so each tool has one parser and one --help.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mrct/commands.h"

namespace mrct {

Run add_passthrough(CLI::App& app, int (*entry)(int, char**), const char* prog) {
  app.prefix_command();
  app.allow_extras();
  app.set_help_flag();  // --help goes to the tool itself
  return [&app, entry, prog] {
    std::vector<std::string> args{prog};
    for (const std::string& a : app.remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return entry(static_cast<int>(args.size()), argv.data());
  };
}

Run add_exec(CLI::App& app, std::vector<std::string> command, std::string pythonpath) {
  app.prefix_command();
  app.allow_extras();
  app.set_help_flag();
  return [&app, command, pythonpath] {
    std::vector<std::string> args = command;
    for (const std::string& a : app.remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The exec'd tools call back into this very binary (mrct decode, check, endpoint, inject).
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0 && !std::getenv("MRCT")) {
      self[n] = '\0';
      setenv("MRCT", self, 1);
    }
    if (!pythonpath.empty()) {
      const char* old = std::getenv("PYTHONPATH");
      const std::string v = old && *old ? pythonpath + ":" + old : pythonpath;
      setenv("PYTHONPATH", v.c_str(), 1);
    }
    std::fflush(nullptr);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "mrct: cannot run %s: %s\n", argv[0], std::strerror(errno));
    return errno == ENOENT ? 127 : kExitUsage;
  };
}

}  // namespace mrct
