#include "server/openai/response_store.h"

#include "server/openai/json_input.h"

namespace splash::openai {

std::size_t stored_response_bytes(const StoredResponse& e) {
  std::size_t n = sizeof(StoredResponse) + e.id.size() + dump_json(e.response).size();
  for (const ChatMessage& m : e.conversation) {
    n += sizeof(ChatMessage) + m.role.size() + (m.content ? m.content->size() : 0) +
         (m.reasoning_content ? m.reasoning_content->size() : 0) + (m.tool_call_id ? m.tool_call_id->size() : 0) +
         (m.name ? m.name->size() : 0);
    for (const HistoryToolCall& c : m.tool_calls) {
      // arguments_object is a parse of arguments: count the text twice.
      n += sizeof(HistoryToolCall) + c.id.size() + c.name.size() + 2 * dump_json(c.arguments).size();
    }
  }
  return n;
}

ResponseStore::ResponseStore(std::size_t max_entries, std::size_t max_bytes)
    : max_entries_(max_entries), max_bytes_(max_bytes) {}

bool ResponseStore::put(StoredResponse entry) {
  const std::size_t n = stored_response_bytes(entry);
  std::lock_guard lock(mu_);
  if (auto it = slots_.find(entry.id); it != slots_.end()) erase_locked(it);
  if (n > max_bytes_ || max_entries_ == 0) return false;
  while (!lru_.empty() && (slots_.size() + 1 > max_entries_ || bytes_ + n > max_bytes_)) {
    erase_locked(slots_.find(lru_.back()));
  }
  lru_.push_front(entry.id);
  std::string id = entry.id;
  slots_.emplace(std::move(id), Slot{std::make_shared<const StoredResponse>(std::move(entry)), n, lru_.begin()});
  bytes_ += n;
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.entry;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return false;
  erase_locked(it);
  return true;
}

void ResponseStore::erase_locked(std::unordered_map<std::string, Slot>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  slots_.erase(it);
}

std::size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return slots_.size();
}

std::size_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace splash::openai
