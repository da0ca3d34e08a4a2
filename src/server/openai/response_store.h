// The in-process store behind GET / DELETE /v1/responses/{id} and previous_response_id (spec 2.8:
// an LRU of at most 64 MiB). Each entry keeps the Response object as the client saw it and the whole
// conversation that produced it (earlier turns, the request's input, the model's output as an
// assistant turn; without the instructions, which OpenAI does not carry over), so a follow-up request
// renders the same history and hits the prefix cache.
//
// Bounded by entry count and by bytes (the entries' approximate sizes); putting an entry evicts the
// least recently used ones until both bounds hold. An entry larger than the byte bound alone is not
// kept. get() counts as a use. Thread-safe: every method takes the store's mutex; entries are
// immutable and shared, so a reader keeps its copy alive after the entry is evicted.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/request.h"

namespace splash::openai {

struct StoredResponse {
  std::string id;
  nlohmann::ordered_json response;        // the Response object (status, output, usage ...)
  std::vector<ChatMessage> conversation;  // history for previous_response_id
};

// Approximate bytes an entry holds (its strings and JSON text).
std::size_t stored_response_bytes(const StoredResponse& entry);

class ResponseStore {
 public:
  static constexpr std::size_t kDefaultMaxEntries = 4096;
  static constexpr std::size_t kDefaultMaxBytes = std::size_t{64} << 20;  // spec 2.8

  explicit ResponseStore(std::size_t max_entries = kDefaultMaxEntries, std::size_t max_bytes = kDefaultMaxBytes);

  // Inserts or replaces. Returns false when the entry alone is over the byte bound (not kept).
  bool put(StoredResponse entry);
  // nullptr when absent (never stored, deleted, or evicted).
  std::shared_ptr<const StoredResponse> get(const std::string& id);
  // True when the entry existed.
  bool erase(const std::string& id);

  std::size_t size() const;
  std::size_t bytes() const;

 private:
  struct Slot {
    std::shared_ptr<const StoredResponse> entry;
    std::size_t bytes = 0;
    std::list<std::string>::iterator lru;  // position in lru_ (front = most recent)
  };
  void erase_locked(std::unordered_map<std::string, Slot>::iterator it);

  const std::size_t max_entries_, max_bytes_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;
  std::unordered_map<std::string, Slot> slots_;
  std::size_t bytes_ = 0;
};

}  // namespace splash::openai
