// Stand-alone driver of the test-model generator for the reference checks (tests/reference),
// until `splash make-test-model` is wired in src/cli; it takes the same flags.
#include <cstdio>
#include <string>
#include <vector>

#include "testmodel/test_model.h"
#include "testmodel/test_model_args.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = splash::parse_test_model_args(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.error_message().c_str());
    return 2;
  }
  const auto st = splash::write_test_model(parsed->spec, parsed->out_path);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.error_message().c_str());
    return 1;
  }
  return 0;
}
