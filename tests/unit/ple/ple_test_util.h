// The reference data of tests/unit/ple/ple_reference.py, written once per test binary into a
// temporary directory (skipped where /usr/bin/python3 has no numpy).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace splash::ple::test {

class ReferenceData {
 public:
  // The directory, or "" when the reference could not run (the reason in `why`).
  static const ReferenceData& get() {
    static ReferenceData d;
    return d;
  }
  const std::string& dir() const { return dir_; }
  const std::string& why() const { return why_; }

  static std::vector<float> read_f32(const std::string& path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    std::vector<float> v(static_cast<size_t>(f.tellg()) / sizeof(float));
    f.seekg(0);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    return v;
  }

 private:
  ReferenceData() {
    if (!std::filesystem::exists("/usr/bin/python3") ||
        std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
      why_ = "/usr/bin/python3 with numpy is not available";
      return;
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "splash-ple-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      why_ = "mkdtemp failed";
      return;
    }
    const std::string cmd =
        std::string("/usr/bin/python3 ") + SPLASH_SOURCE_DIR + "/tests/unit/ple/ple_reference.py " + tmpl;
    if (std::system(cmd.c_str()) != 0) {
      why_ = "tests/unit/ple/ple_reference.py failed";
      std::filesystem::remove_all(tmpl);
      return;
    }
    dir_ = tmpl;
  }
  ~ReferenceData() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_, why_;
};

}  // namespace splash::ple::test
