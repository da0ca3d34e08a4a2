// `splash make-test-model`: tiny random-weight models for tests and benchmark-shaped ones. The options
// are parsed by the testmodel module (test_model_args.h) so its tests cover them; this only forwards.
#include <cstdio>

#include "cli/commands.h"
#include "testmodel/test_model_args.h"

namespace splash::cli {

Runner register_make_test_model(CLI::App& app) {
  app.prefix_command();  // every argument goes to parse_test_model_args
  app.footer(test_model_usage());
  CLI::App* self = &app;
  return [self] {
    std::vector<std::string> args = self->remaining();
    auto parsed = parse_test_model_args(args);
    if (!parsed.ok()) {
      std::fprintf(stderr, "error: %s\n", parsed.error().message.c_str());
      return 2;
    }
    Status s = write_test_model(parsed->spec, parsed->out_path);
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.error_message().c_str());
      return 1;
    }
    std::printf("wrote %s\n", parsed->out_path.c_str());
    return 0;
  };
}

}  // namespace splash::cli
