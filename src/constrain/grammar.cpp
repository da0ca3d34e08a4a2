#include "constrain/grammar.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

namespace splash::constrain {

// --- builder --------------------------------------------------------------------------------------

GrammarBuilder::ExprId GrammarBuilder::add(Expr e) {
  exprs_.push_back(std::move(e));
  return static_cast<ExprId>(exprs_.size() - 1);
}

int32_t GrammarBuilder::declare_rule(std::string name) {
  rule_names_.push_back(std::move(name));
  rule_bodies_.push_back(-1);
  return static_cast<int32_t>(rule_bodies_.size() - 1);
}

void GrammarBuilder::define_rule(int32_t rule, ExprId body) { rule_bodies_[rule] = body; }

GrammarBuilder::ExprId GrammarBuilder::empty() { return add(Expr{}); }

GrammarBuilder::ExprId GrammarBuilder::nothing() {
  Expr e;
  e.kind = Expr::Kind::kNothing;
  return add(std::move(e));
}

GrammarBuilder::ExprId GrammarBuilder::bytes(const ByteSet& set) {
  if (set.empty()) return nothing();
  Expr e;
  e.kind = Expr::Kind::kBytes;
  e.set = set;
  return add(std::move(e));
}

GrammarBuilder::ExprId GrammarBuilder::literal(std::string_view text) {
  std::vector<ExprId> parts;
  for (char c : text) parts.push_back(bytes(ByteSet::of(static_cast<uint8_t>(c))));
  return seq(std::move(parts));
}

GrammarBuilder::ExprId GrammarBuilder::seq(std::vector<ExprId> parts) {
  if (parts.empty()) return empty();
  if (parts.size() == 1) return parts[0];
  Expr e;
  e.kind = Expr::Kind::kSeq;
  e.kids = std::move(parts);
  return add(std::move(e));
}

GrammarBuilder::ExprId GrammarBuilder::alt(std::vector<ExprId> options) {
  if (options.empty()) return nothing();
  if (options.size() == 1) return options[0];
  Expr e;
  e.kind = Expr::Kind::kAlt;
  e.kids = std::move(options);
  return add(std::move(e));
}

GrammarBuilder::ExprId GrammarBuilder::repeat(ExprId item, int32_t min, int32_t max) {
  if (max >= 0 && max < min) return nothing();
  if (min == 1 && max == 1) return item;
  if (max == 0) return empty();
  Expr e;
  e.kind = Expr::Kind::kRepeat;
  e.kids = {item};
  e.min = min;
  e.max = max;
  return add(std::move(e));
}

GrammarBuilder::ExprId GrammarBuilder::until(std::string_view terminator) {
  SPLASH_CHECK(!terminator.empty());
  Expr e;
  e.kind = Expr::Kind::kUntil;
  e.text = std::string(terminator);
  return add(std::move(e));
}

GrammarBuilder::ExprId GrammarBuilder::text_without(std::string_view terminator) {
  const ExprId id = until(terminator);
  exprs_[id].min = 1;
  return id;
}

GrammarBuilder::ExprId GrammarBuilder::ref(int32_t rule) {
  Expr e;
  e.kind = Expr::Kind::kRef;
  e.rule = rule;
  return add(std::move(e));
}

GrammarBuilder::ExprId GrammarBuilder::counted(ExprId item, int32_t lo, int32_t hi) {
  if ((hi >= 0 ? hi : lo) <= kCountFrom) return repeat(item, lo, hi);
  if (hi >= 0 && hi < lo) return nothing();
  const int32_t item_rule = declare_rule("char");
  define_rule(item_rule, item);
  Expr e;
  e.kind = Expr::Kind::kCount;
  e.kids = {repeat(item, lo, hi)};
  e.min = lo;
  e.max = hi;
  e.rule = item_rule;
  const int32_t rule = declare_rule("count");
  define_rule(rule, add(std::move(e)));
  return ref(rule);
}

// --- compilation ----------------------------------------------------------------------------------

namespace {

// A Thompson automaton for one rule: epsilon, byte-set and call edges.
struct Nfa {
  struct ByteEdge {
    ByteSet set;
    int32_t to;
  };
  struct CallEdge {
    int32_t rule;
    int32_t to;
  };
  struct Node {
    std::vector<int32_t> eps;
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
  };
  std::vector<Node> nodes;
  bool too_big = false;

  int32_t node() {
    if (nodes.size() >= static_cast<size_t>(Grammar::kMaxStates)) too_big = true;
    nodes.emplace_back();
    return static_cast<int32_t>(nodes.size() - 1);
  }
};

struct Fragment {
  int32_t start, end;
};

Fragment build_fragment(const GrammarBuilder& b, GrammarBuilder::ExprId id, Nfa& nfa) {
  using Kind = GrammarBuilder::Expr::Kind;
  const GrammarBuilder::Expr& e = b.expr(id);
  const int32_t s = nfa.node();
  const int32_t t = nfa.node();
  if (nfa.too_big) return {s, t};
  switch (e.kind) {
    case Kind::kEmpty:
      nfa.nodes[s].eps.push_back(t);
      break;
    case Kind::kNothing:
      break;
    case Kind::kBytes:
      nfa.nodes[s].bytes.push_back({e.set, t});
      break;
    case Kind::kRef:
      nfa.nodes[s].calls.push_back({e.rule, t});
      break;
    case Kind::kCount:
      SPLASH_CHECK(false && "a counting expression is always a whole rule body");
      break;
    case Kind::kUntil: {
      // The matcher of the terminator (Knuth-Morris-Pratt): node i = i bytes of it matched.
      const std::string& p = e.text;
      const size_t k = p.size();
      std::vector<size_t> fail(k + 1, 0);
      for (size_t i = 1; i < k; ++i) {
        size_t j = fail[i];
        while (j > 0 && p[i] != p[j]) j = fail[j];
        fail[i + 1] = (p[i] == p[j]) ? j + 1 : 0;
      }
      std::vector<int32_t> node(k);
      node[0] = s;
      for (size_t i = 1; i < k; ++i) node[i] = nfa.node();
      if (nfa.too_big) return {s, t};
      for (size_t i = 0; i < k; ++i) {
        std::vector<ByteSet> to(k + 1);
        for (int c = 0; c < 256; ++c) {
          size_t j = i;
          while (j > 0 && static_cast<uint8_t>(p[j]) != c) j = fail[j];
          if (static_cast<uint8_t>(p[j]) == c) ++j;
          to[j].add(static_cast<uint8_t>(c));
        }
        for (size_t j = 0; j <= k; ++j) {
          if (to[j].empty() || (j == k && e.min == 1)) continue;
          nfa.nodes[node[i]].bytes.push_back({to[j], j == k ? t : node[j]});
        }
        if (e.min == 1) nfa.nodes[node[i]].eps.push_back(t);  // text_without: may end anywhere
      }
      break;
    }
    case Kind::kSeq: {
      int32_t at = s;
      for (auto kid : e.kids) {
        const Fragment f = build_fragment(b, kid, nfa);
        if (nfa.too_big) return {s, t};
        nfa.nodes[at].eps.push_back(f.start);
        at = f.end;
      }
      nfa.nodes[at].eps.push_back(t);
      break;
    }
    case Kind::kAlt:
      for (auto kid : e.kids) {
        const Fragment f = build_fragment(b, kid, nfa);
        if (nfa.too_big) return {s, t};
        nfa.nodes[s].eps.push_back(f.start);
        nfa.nodes[f.end].eps.push_back(t);
      }
      break;
    case Kind::kRepeat: {
      int32_t at = s;
      for (int32_t i = 0; i < e.min; ++i) {
        const Fragment f = build_fragment(b, e.kids[0], nfa);
        if (nfa.too_big) return {s, t};
        nfa.nodes[at].eps.push_back(f.start);
        at = f.end;
      }
      if (e.max < 0) {
        const Fragment f = build_fragment(b, e.kids[0], nfa);
        if (nfa.too_big) return {s, t};
        nfa.nodes[at].eps.push_back(f.start);
        nfa.nodes[f.end].eps.push_back(at);
        nfa.nodes[at].eps.push_back(t);
      } else {
        // Optional copies chained so that each may end the repetition: one way to parse each count.
        for (int32_t i = e.min; i < e.max; ++i) {
          const Fragment f = build_fragment(b, e.kids[0], nfa);
          if (nfa.too_big) return {s, t};
          nfa.nodes[at].eps.push_back(t);
          nfa.nodes[at].eps.push_back(f.start);
          at = f.end;
        }
        nfa.nodes[at].eps.push_back(t);
      }
      break;
    }
  }
  return {s, t};
}

// Epsilon closures with a visited stamp reused across calls (an allocation per call dominated the
// subset construction of large unrolled repetitions).
class Closer {
 public:
  explicit Closer(const Nfa& nfa) : nfa_(nfa), stamp_(nfa.nodes.size(), 0) {}

  void close(std::vector<int32_t>& set) {
    ++gen_;
    work_.clear();
    for (int32_t n : set) {
      if (stamp_[n] != gen_) {
        stamp_[n] = gen_;
        work_.push_back(n);
      }
    }
    set = work_;
    while (!work_.empty()) {
      const int32_t n = work_.back();
      work_.pop_back();
      for (int32_t m : nfa_.nodes[n].eps) {
        if (stamp_[m] != gen_) {
          stamp_[m] = gen_;
          set.push_back(m);
          work_.push_back(m);
        }
      }
    }
    std::sort(set.begin(), set.end());
  }

 private:
  const Nfa& nfa_;
  std::vector<uint32_t> stamp_;
  std::vector<int32_t> work_;
  uint32_t gen_ = 0;
};

// Subset construction; appends the rule's states to `g` and returns its start state.
int32_t determinize(const Nfa& nfa, Fragment f, Grammar& g) {
  Closer closer(nfa);
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> pending;
  auto intern = [&](std::vector<int32_t> set) {
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    const auto id = static_cast<int32_t>(g.states.size());
    g.states.emplace_back();
    ids.emplace(set, id);
    pending.push_back(std::move(set));
    return id;
  };
  std::vector<int32_t> first{f.start};
  closer.close(first);
  const int32_t start = intern(std::move(first));
  // States are filled in creation order; `pending` holds the sets of states not yet filled.
  size_t next = 0;
  std::vector<std::vector<int32_t>> sets;
  while (next < pending.size()) {
    const std::vector<int32_t> set = pending[next];
    const auto id = static_cast<int32_t>(start + next);
    ++next;
    if (g.states.size() > static_cast<size_t>(Grammar::kMaxStates)) return start;
    Grammar::State st;
    st.accepting = std::binary_search(set.begin(), set.end(), f.end);
    // Byte edges: split the bytes into classes no member edge tells apart, take each class's target
    // set once, then emit runs of bytes with the same target.
    std::vector<const Nfa::ByteEdge*> member_edges;
    for (int32_t n : set) {
      for (const auto& be : nfa.nodes[n].bytes) member_edges.push_back(&be);
    }
    std::vector<Grammar::Edge> edges;
    if (!member_edges.empty()) {
      std::vector<ByteSet> classes{ByteSet::all()};
      for (const auto* be : member_edges) {
        std::vector<ByteSet> next;
        for (const ByteSet& c : classes) {
          ByteSet in, out;
          for (int w = 0; w < 4; ++w) {
            in.bits[w] = c.bits[w] & be->set.bits[w];
            out.bits[w] = c.bits[w] & ~be->set.bits[w];
          }
          if (!in.empty()) next.push_back(in);
          if (!out.empty()) next.push_back(out);
        }
        classes = std::move(next);
      }
      std::vector<int32_t> byte_target(256, -1);
      for (const ByteSet& c : classes) {
        int first_byte = 0;
        while (!c.has(static_cast<uint8_t>(first_byte))) ++first_byte;
        std::vector<int32_t> t;
        for (const auto* be : member_edges) {
          if (be->set.has(static_cast<uint8_t>(first_byte))) t.push_back(be->to);
        }
        if (t.empty()) continue;
        std::sort(t.begin(), t.end());
        t.erase(std::unique(t.begin(), t.end()), t.end());
        closer.close(t);
        const int32_t to = intern(std::move(t));
        for (int b = 0; b < 256; ++b) {
          if (c.has(static_cast<uint8_t>(b))) byte_target[b] = to;
        }
      }
      int c = 0;
      while (c < 256) {
        if (byte_target[c] < 0) {
          ++c;
          continue;
        }
        int d = c;
        while (d + 1 < 256 && byte_target[d + 1] == byte_target[c]) ++d;
        edges.push_back({static_cast<uint8_t>(c), static_cast<uint8_t>(d), byte_target[c]});
        c = d + 1;
      }
    }
    std::map<int32_t, std::vector<int32_t>> call_targets;
    for (int32_t n : set) {
      for (const auto& ce : nfa.nodes[n].calls) call_targets[ce.rule].push_back(ce.to);
    }
    std::vector<Grammar::Call> calls;
    for (auto& [rule, t] : call_targets) {
      std::sort(t.begin(), t.end());
      t.erase(std::unique(t.begin(), t.end()), t.end());
      closer.close(t);
      calls.push_back({rule, intern(std::move(t))});
    }
    st.edges_begin = static_cast<uint32_t>(g.edges.size());
    g.edges.insert(g.edges.end(), edges.begin(), edges.end());
    st.edges_end = static_cast<uint32_t>(g.edges.size());
    st.calls_begin = static_cast<uint32_t>(g.calls.size());
    g.calls.insert(g.calls.end(), calls.begin(), calls.end());
    st.calls_end = static_cast<uint32_t>(g.calls.size());
    g.states[id] = st;
  }
  return start;
}

// Whether the automaton from `start` reads exactly one character: no calls, not empty, and no
// accepting state reads on (so a token's bytes split into characters one way only).
bool one_character(const Grammar& g, int32_t start) {
  if (g.states[start].accepting) return false;
  std::vector<int32_t> stack{start};
  std::vector<char> seen(g.states.size(), 0);
  seen[start] = 1;
  while (!stack.empty()) {
    const Grammar::State& st = g.states[stack.back()];
    stack.pop_back();
    if (st.calls_begin != st.calls_end) return false;
    if (st.accepting && st.edges_begin != st.edges_end) return false;
    for (uint32_t i = st.edges_begin; i < st.edges_end; ++i) {
      if (!seen[g.edges[i].to]) {
        seen[g.edges[i].to] = 1;
        stack.push_back(g.edges[i].to);
      }
    }
  }
  return true;
}

}  // namespace

Result<Grammar> GrammarBuilder::build(int32_t root) const {
  using Kind = Expr::Kind;
  // Rules reachable from the root.
  const int32_t n_rules = rule_count();
  std::vector<char> reachable(n_rules, 0);
  std::vector<int32_t> order;
  std::vector<int32_t> work{root};
  reachable[root] = 1;
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    order.push_back(r);
    if (rule_bodies_[r] < 0) return make_error("grammar rule '", rule_names_[r], "' is used but not defined");
    std::vector<ExprId> exprs{rule_bodies_[r]};
    while (!exprs.empty()) {
      const Expr& e = exprs_[exprs.back()];
      exprs.pop_back();
      if ((e.kind == Kind::kRef || e.kind == Kind::kCount) && !reachable[e.rule]) {
        reachable[e.rule] = 1;
        work.push_back(e.rule);
      }
      exprs.insert(exprs.end(), e.kids.begin(), e.kids.end());
    }
  }

  Grammar g;
  g.root = root;
  g.rules.resize(n_rules);
  for (int32_t r = 0; r < n_rules; ++r) g.rules[r].name = rule_names_[r];
  // Counting rules go last: each checks that its item's automaton reads exactly one character.
  std::stable_partition(order.begin(), order.end(), [&](int32_t r) { return exprs_[rule_bodies_[r]].kind != Kind::kCount; });
  for (int32_t r : order) {
    const Expr& body = exprs_[rule_bodies_[r]];
    if (body.kind == Kind::kCount && one_character(g, g.rules[body.rule].start)) {
      g.rules[r].start = static_cast<int32_t>(g.states.size());
      Grammar::State st;
      st.accepting = true;
      st.counter = static_cast<int32_t>(g.counters.size());
      st.calls_begin = static_cast<uint32_t>(g.calls.size());
      g.calls.push_back({body.rule, g.rules[r].start});
      st.calls_end = static_cast<uint32_t>(g.calls.size());
      st.edges_begin = st.edges_end = static_cast<uint32_t>(g.edges.size());
      g.states.push_back(st);
      g.counters.push_back({body.rule, body.min, body.max, ByteSet()});
      continue;
    }
    Nfa nfa;
    const Fragment f = build_fragment(*this, body.kind == Kind::kCount ? body.kids[0] : rule_bodies_[r], nfa);
    if (nfa.too_big) return make_error("grammar too large: rule '", rule_names_[r], "' needs over ", Grammar::kMaxStates,
                                       " states (a large bounded repetition, e.g. maxLength or maxItems?)");
    g.rules[r].start = determinize(nfa, f, g);
    if (g.states.size() > static_cast<size_t>(Grammar::kMaxStates)) {
      return make_error("grammar too large: over ", Grammar::kMaxStates, " automaton states");
    }
  }

  // Productive rules (can match some string) and live states (can reach the rule's end).
  const size_t n_states = g.states.size();
  std::vector<char> productive(n_rules, 0), live(n_states, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < n_states; ++s) {
      if (live[s]) continue;
      const Grammar::State& st = g.states[s];
      bool ok = st.accepting;
      for (uint32_t i = st.edges_begin; !ok && i < st.edges_end; ++i) ok = live[g.edges[i].to];
      for (uint32_t i = st.calls_begin; !ok && i < st.calls_end; ++i) ok = productive[g.calls[i].rule] && live[g.calls[i].to];
      if (ok) live[s] = changed = 1;
    }
    for (int32_t r : order) {
      if (!productive[r] && live[g.rules[r].start]) productive[r] = changed = 1;
    }
  }
  if (!productive[root]) return make_error("the grammar matches no string at all");
  // Drop edges into dead states and calls of rules that match nothing.
  {
    std::vector<Grammar::Edge> edges;
    std::vector<Grammar::Call> calls;
    for (auto& st : g.states) {
      const uint32_t eb = static_cast<uint32_t>(edges.size());
      for (uint32_t i = st.edges_begin; i < st.edges_end; ++i) if (live[g.edges[i].to]) edges.push_back(g.edges[i]);
      const uint32_t cb = static_cast<uint32_t>(calls.size());
      for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
        if (productive[g.calls[i].rule] && live[g.calls[i].to]) calls.push_back(g.calls[i]);
      }
      st.edges_begin = eb;
      st.edges_end = static_cast<uint32_t>(edges.size());
      st.calls_begin = cb;
      st.calls_end = static_cast<uint32_t>(calls.size());
    }
    g.edges = std::move(edges);
    g.calls = std::move(calls);
  }

  // Nullable rules, then the "calls at its start" graph, which must have no cycle (left recursion).
  std::vector<char> nullable(n_rules, 0);
  auto start_region = [&](int32_t r, const std::function<void(const Grammar::Call&)>& on_call) {
    std::vector<int32_t> stack{g.rules[r].start};
    std::vector<char> seen(n_states, 0);
    seen[stack[0]] = 1;
    bool reaches_end = false;
    while (!stack.empty()) {
      const auto& st = g.states[stack.back()];
      stack.pop_back();
      if (st.accepting && (st.counter < 0 || g.counters[st.counter].lo == 0)) reaches_end = true;
      for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
        const auto& c = g.calls[i];
        on_call(c);
        if (nullable[c.rule] && !seen[c.to]) {
          seen[c.to] = 1;
          stack.push_back(c.to);
        }
      }
    }
    return reaches_end;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r : order) {
      if (!nullable[r] && start_region(r, [](const Grammar::Call&) {})) nullable[r] = changed = 1;
    }
  }
  std::vector<std::vector<int32_t>> left_calls(n_rules);
  for (int32_t r : order) start_region(r, [&](const Grammar::Call& c) { left_calls[r].push_back(c.rule); });
  std::vector<char> color(n_rules, 0);  // 0 new, 1 on the path, 2 done
  std::function<int32_t(int32_t)> find_cycle = [&](int32_t r) -> int32_t {
    color[r] = 1;
    for (int32_t q : left_calls[r]) {
      if (color[q] == 1) return q;
      if (color[q] == 0) {
        const int32_t found = find_cycle(q);
        if (found >= 0) return found;
      }
    }
    color[r] = 2;
    return -1;
  };
  for (int32_t r : order) {
    if (color[r] == 0) {
      const int32_t bad = find_cycle(r);
      if (bad >= 0) {
        return make_error("grammar rule '", rule_names_[bad],
                          "' is left-recursive (it can call itself before reading a byte); rewrite it with repetition");
      }
    }
  }
  g.compute_follow_sets();
  g.compute_state_keys();
  g.build_dense_tables();
  return g;
}

void Grammar::compute_follow_sets() {
  // The bytes that may start what comes after a call returns to `to`. A state where that part may
  // already end depends on the caller's caller: every byte, which keeps the set a superset.
  auto first_bytes = [&](int32_t to) {
    ByteSet set;
    std::vector<int32_t> stack{to};
    std::vector<char> seen(states.size(), 0);
    seen[to] = 1;
    while (!stack.empty()) {
      const State& st = states[stack.back()];
      stack.pop_back();
      if (st.accepting) return ByteSet::all();
      for (uint32_t i = st.edges_begin; i < st.edges_end; ++i) set.add(ByteSet::range(edges[i].lo, edges[i].hi));
      for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
        for (int32_t next : {rules[calls[i].rule].start, calls[i].to}) {
          if (!seen[next]) {
            seen[next] = 1;
            stack.push_back(next);
          }
        }
      }
    }
    return set;
  };
  for (Counter& k : counters) k.follow = ByteSet();
  for (const State& st : states) {
    for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
      const int32_t counter = states[rules[calls[i].rule].start].counter;
      if (counter >= 0) counters[counter].follow.add(first_bytes(calls[i].to));
    }
  }
}

void Grammar::build_dense_tables() {
  // The string-content states of JSON have a dozen byte ranges; the mask walks step them for every
  // node of the vocabulary trie, so they get a table instead of a scan.
  dense.clear();
  for (State& st : states) {
    st.table = -1;
    if (st.edges_end - st.edges_begin < kDenseEdges) continue;
    st.table = static_cast<int32_t>(dense.size() / 256);
    dense.resize(dense.size() + 256, -1);
    int32_t* row = dense.data() + static_cast<size_t>(st.table) * 256;
    for (uint32_t i = st.edges_begin; i < st.edges_end; ++i) {
      for (int b = edges[i].lo; b <= edges[i].hi; ++b) row[b] = edges[i].to;
    }
  }
}

// --- digests --------------------------------------------------------------------------------------

void Grammar::compute_state_keys() {
  // A rule's digest numbers the states reachable from its start in discovery order, so equal
  // sub-grammars give equal sequences; a state's key is its rule's digest and its number there.
  state_keys.assign(states.size(), 0);
  std::vector<int32_t> rule_of(states.size(), -1);
  for (size_t r = 0; r < rules.size(); ++r) {
    if (rules[r].start < 0) continue;
    // A rule's states are contiguous from its start, up to the next rule's start.
    int32_t end = static_cast<int32_t>(states.size());
    for (const Rule& o : rules) {
      if (o.start > rules[r].start && o.start < end) end = o.start;
    }
    for (int32_t s = rules[r].start; s < end; ++s) rule_of[s] = static_cast<int32_t>(r);
  }
  std::unordered_map<int32_t, uint32_t> number;
  std::vector<int32_t> queue;
  for (size_t r = 0; r < rules.size(); ++r) {
    if (rules[r].start < 0) continue;
    number.clear();
    queue.assign(1, rules[r].start);
    number.emplace(rules[r].start, 0);
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 0x100000001b3ull;
    };
    auto id_of = [&](int32_t s) {
      auto [it, fresh] = number.emplace(s, static_cast<uint32_t>(number.size()));
      if (fresh) queue.push_back(s);
      return it->second;
    };
    for (size_t qi = 0; qi < queue.size(); ++qi) {
      const State& st = states[queue[qi]];
      // A state of a called rule ends that rule, not this one: mark where each ends.
      mix(st.accepting ? 0xA0 + (rule_of[queue[qi]] == static_cast<int32_t>(r) ? 1 : 0) : 0xB);
      if (st.counter >= 0) {
        mix(0xE0);
        for (uint64_t w : counters[st.counter].follow.bits) mix(w);
        mix(static_cast<uint32_t>(counters[st.counter].lo));
        mix(static_cast<uint32_t>(counters[st.counter].hi));
      }
      for (uint32_t i = st.edges_begin; i < st.edges_end; ++i) {
        mix((uint64_t{edges[i].lo} << 8) | edges[i].hi);
        mix(id_of(edges[i].to));
      }
      mix(0xC);
      for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
        mix(id_of(rules[calls[i].rule].start));
        mix(id_of(calls[i].to));
      }
      mix(0xD);
    }
    for (const auto& [s, n] : number) {
      if (rule_of[s] == static_cast<int32_t>(r)) state_keys[s] = (h ^ (uint64_t{n} * 0x9e3779b97f4a7c15ull)) | 1;
    }
  }
}

}  // namespace splash::constrain
