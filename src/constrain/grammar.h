// A context-free grammar over bytes, compiled for matching (issue 39). Front ends (JSON Schema,
// GBNF, regex) build expressions with GrammarBuilder; build() compiles each rule into a
// deterministic automaton whose edges are byte ranges or calls of other rules, so a matcher runs
// the grammar as a pushdown automaton (matcher.h). Decisions:
// - Rules are automata, not Earley items: the grammars we meet (JSON, tool calls) are nearly
//   deterministic, so a handful of parallel stacks suffice and a byte step is a table lookup.
// - Left recursion is refused at build time (a pushdown automaton would recurse forever on it);
//   GBNF users write `x ::= y ("," y)*` instead, as llama.cpp also requires.
// - Bounded repetition is unrolled, except a long repetition of one character (a string's
//   maxLength, a regex's {m,n} over a class): that is a counting rule (counted()), one state whose
//   count rides on the stack, so every position shares one token table (mask_cache.h) instead of
//   costing a trie walk each. build() refuses a grammar whose automata would pass kMaxStates, so a
//   huge repetition of anything else is a clear error rather than a slow server.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace splash::constrain {

// A set of bytes as a 256-bit mask.
struct ByteSet {
  uint64_t bits[4] = {0, 0, 0, 0};

  static ByteSet of(uint8_t b) { ByteSet s; s.add(b); return s; }
  static ByteSet range(uint8_t lo, uint8_t hi) { ByteSet s; s.add_range(lo, hi); return s; }
  static ByteSet all() { return range(0, 255); }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) { for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b)); }
  void add(const ByteSet& o) { for (int i = 0; i < 4; ++i) bits[i] |= o.bits[i]; }
  void remove(const ByteSet& o) { for (int i = 0; i < 4; ++i) bits[i] &= ~o.bits[i]; }
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  ByteSet inverted() const { ByteSet s; for (int i = 0; i < 4; ++i) s.bits[i] = ~bits[i]; return s; }
  bool operator==(const ByteSet&) const = default;
};

// The compiled grammar: every rule's automaton in one state table (state ids are global).
struct Grammar {
  static constexpr int32_t kMaxStates = 200000;

  struct Edge {        // consume one byte in [lo, hi]
    uint8_t lo, hi;
    int32_t to;
  };
  struct Call {        // run `rule` to its end, then continue at `to`
    int32_t rule;
    int32_t to;
  };
  struct State {
    uint32_t edges_begin = 0, edges_end = 0;  // into edges, sorted by lo, disjoint
    int32_t table = -1;                       // states with many edges: 256 targets at dense[table * 256]
    uint32_t calls_begin = 0, calls_end = 0;  // into calls
    bool accepting = false;                   // the rule may end here
    int32_t counter = -1;                     // a counting state: counters[counter] (pda.h)
  };
  // A counting rule's one state: it calls `item` (one character: never empty, and no accepting
  // state of it reads on) while its count is below `hi` and may end once the count reaches `lo`.
  // Its `accepting` flag says "may end" for the static analyses; the run checks the count.
  struct Counter {
    int32_t item;   // the rule of one character
    int32_t lo;
    int32_t hi;     // < 0: unbounded (the count then stops at lo, where it no longer matters)
    ByteSet follow;  // bytes that may come right after the repetition, wherever it is called (a superset)
  };
  struct Rule {
    std::string name;
    int32_t start = -1;
  };

  std::vector<State> states;
  std::vector<Edge> edges;
  std::vector<Call> calls;
  std::vector<Rule> rules;
  std::vector<Counter> counters;
  std::vector<int32_t> dense;  // per-byte targets of states with kDenseEdges edges or more (-1: none)
  int32_t root = 0;  // the rule a whole output must match
  static constexpr uint32_t kDenseEdges = 4;

  // The state reached from `state` by `byte`, or -1.
  int32_t step(int32_t state, uint8_t byte) const {
    const State& s = states[state];
    if (s.table >= 0) return dense[static_cast<size_t>(s.table) * 256 + byte];
    for (uint32_t i = s.edges_begin; i < s.edges_end; ++i) {
      if (byte < edges[i].lo) return -1;
      if (byte <= edges[i].hi) return edges[i].to;
    }
    return -1;
  }
  bool has_edges(int32_t state) const { return states[state].edges_begin != states[state].edges_end; }
  // Per state, a digest of everything reachable from it (its rule's automaton and the rules it may
  // call), equal for equal sub-grammars in different grammars: the key of the token-mask cache.
  // Filled by GrammarBuilder::build().
  std::vector<uint64_t> state_keys;

  void compute_state_keys();
  void compute_follow_sets();
  void build_dense_tables();
};

// Builds expressions and rules; expressions are ids into the builder.
class GrammarBuilder {
 public:
  using ExprId = int32_t;

  // Declares a rule (forward references are fine); names are for messages only and need not be unique.
  int32_t declare_rule(std::string name);
  void define_rule(int32_t rule, ExprId body);
  int32_t rule_count() const { return static_cast<int32_t>(rule_bodies_.size()); }
  bool is_defined(int32_t rule) const { return rule_bodies_[rule] >= 0; }
  const std::string& rule_name(int32_t rule) const { return rule_names_[rule]; }

  ExprId empty();                                   // matches ""
  ExprId nothing();                                 // matches no string at all
  ExprId bytes(const ByteSet& set);                 // one byte of the set
  ExprId literal(std::string_view text);
  ExprId seq(std::vector<ExprId> parts);
  ExprId alt(std::vector<ExprId> options);
  ExprId repeat(ExprId item, int32_t min, int32_t max);  // max < 0: unbounded
  ExprId optional(ExprId item) { return repeat(item, 0, 1); }
  ExprId star(ExprId item) { return repeat(item, 0, -1); }
  ExprId plus(ExprId item) { return repeat(item, 1, -1); }
  ExprId ref(int32_t rule);
  // `item` repeated lo..hi times (hi < 0: unbounded) where item matches exactly one character (a
  // byte class, a UTF-8 sequence, an escape). Long repetitions become a counting rule (Grammar::
  // Counter); short ones, or an item that is not one character, are unrolled as repeat() does.
  ExprId counted(ExprId item, int32_t lo, int32_t hi);
  static constexpr int32_t kCountFrom = 8;  // repetitions up to this many are unrolled
  // Any bytes up to and including the first `terminator` (non-empty): "<think>" ... "</think>".
  ExprId until(std::string_view terminator);
  // Any bytes that do not contain `terminator` (non-empty), the empty string included.
  ExprId text_without(std::string_view terminator);

  // Compiles every rule reachable from `root`. Fails on undefined rules, left recursion, a grammar
  // that matches nothing, or one larger than Grammar::kMaxStates.
  Result<Grammar> build(int32_t root) const;

  struct Expr {
    enum class Kind : uint8_t { kEmpty, kNothing, kBytes, kSeq, kAlt, kRepeat, kRef, kUntil, kCount };
    Kind kind = Kind::kEmpty;
    ByteSet set;                 // kBytes
    std::vector<ExprId> kids;    // kSeq, kAlt, kRepeat (one), kCount (the unrolled fallback)
    int32_t min = 0, max = 0;    // kRepeat, kCount
    int32_t rule = -1;           // kRef, kCount (the item's rule; kCount is always a rule's whole body)
    std::string text;            // kUntil (min 1: text_without, the terminator never read)
  };
  const Expr& expr(ExprId id) const { return exprs_[id]; }

 private:
  ExprId add(Expr e);
  std::vector<Expr> exprs_;
  std::vector<std::string> rule_names_;
  std::vector<ExprId> rule_bodies_;
};

}  // namespace splash::constrain
