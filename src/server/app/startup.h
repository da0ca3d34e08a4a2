// `splash serve`'s life after its flags are parsed (spec 1.4): bind the port (before anything slow,
// so a port in use fails at once), load the model, tokenizer and chat template, plan memory, start
// the engine and the HTTP server, print the Ready line, and on SIGINT / SIGTERM stop the engine and
// the server and return 130 / 143.
//
// Console lines (stdout; errors on stderr, prefixed "error: "):
//   (for OWNER/REPO[:VARIANT], hub/resolve.h's Selected / Fetching lines and progress on stderr)
//   Loading · <model as given>
//   Chat template · native|unsupported
//   Draft · <path>[ (registry)]             (--draft-model, or the registry's draft of a Hub target)
//   Speculative · <method> · block N[ · <drafter path>] | Speculative · off
//   Weights loaded in N.NN s.
//   Memory plan · budget X GiB · weights Y[ (draft D)] · KV pool P pages (B) · lanes L
//   Ready · <model-id> · context <C> · http://<host>:<port>
//   Speculative · dflash · block N · <dir> (attached while serving; was lookup)   (drafter_watch.h)
//   Stopping · releasing engine resources
#pragma once

#include <string>

#include "server/app/serve_options.h"

namespace splash::app {

// Runs the server until a signal; returns the process exit code (0 never: 1 on a start-up failure,
// 130 after SIGINT, 143 after SIGTERM). Call from the main thread before any other thread exists:
// it blocks SIGINT / SIGTERM in every thread and waits for them on a dedicated one.
int serve(const ServeOptions& options);

// The model id when no --served-model-name is given: the file or folder name of the path.
std::string default_model_id(const std::string& model_path);

}  // namespace splash::app
