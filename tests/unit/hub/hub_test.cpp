// hub/: --model parsing, the GGUF variant rule, the HF cache layout, progress text, ETag hashes, the
// GGUF header scan, identification refusals, the draft registry. The network paths are covered by
// tests/hub/hub_e2e.py against the mock hub.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "formats/gguf_writer.h"
#include "hub/download.h"
#include "hub/draft_registry.h"
#include "hub/gguf_select.h"
#include "hub/hf_cache.h"
#include "hub/identify.h"
#include "hub/model_ref.h"
#include "hub/progress.h"
#include "hub/resolve.h"

namespace splash::hub {
namespace {

namespace fs = std::filesystem;
auto never = [](const std::string&) { return false; };

TEST(HubModelRef, ParsesRepositoriesVariantsAndPaths) {
  auto r = parse_model_ref("Qwen/Qwen3-0.6B-GGUF:Q4_K_M", never);
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_TRUE(r->is_hub());
  EXPECT_EQ(r->repo, "Qwen/Qwen3-0.6B-GGUF");
  EXPECT_EQ(r->variant, "Q4_K_M");
  EXPECT_EQ(r->text(), "Qwen/Qwen3-0.6B-GGUF:Q4_K_M");
  r = parse_model_ref("mlx-community/Qwen3-4B-4bit", never);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->variant.empty());
  for (const char* local : {"/models/x", "./x", "~/m.gguf", "model.gguf", "stories15M.bin"}) {
    r = parse_model_ref(local, never);
    ASSERT_TRUE(r.ok()) << local;
    EXPECT_FALSE(r->is_hub()) << local;
  }
  // An existing path wins over a repository id of the same text.
  r = parse_model_ref("owner/name", [](const std::string&) { return true; });
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->is_hub());
}

TEST(HubModelRef, RefusesBadIds) {
  for (const char* bad : {"noslash", "a/b/c", "a--b/c", "a/b..c", "a/b.git", "-a/b", "a/b-", "a/b c", "a/",
                          "a/b:", "a/b:-x", "a/b:x y", "a/b:x/y"}) {
    EXPECT_FALSE(parse_model_ref(bad, never).ok()) << bad;
  }
  EXPECT_FALSE(parse_model_ref(std::string(100, 'a') + "/b", never).ok());
  EXPECT_FALSE(parse_model_ref("a/b:" + std::string(65, 'Q'), never).ok());
  EXPECT_TRUE(parse_model_ref("a/b:" + std::string(64, 'Q'), never).ok());
}

TEST(HubModelRef, Revisions) {
  for (const char* ok : {"main", "v1.0", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567"})
    EXPECT_TRUE(check_revision(ok).ok()) << ok;
  for (const char* bad : {"", "a b", "../x", "x/../y", "/x", "x/", "a?b", "a#b"})
    EXPECT_FALSE(check_revision(bad).ok()) << bad;
  EXPECT_TRUE(is_commit_hash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(is_commit_hash("main"));
}

TEST(HubGgufSelect, SpecRule) {
  const std::vector<std::string> files = {"Qwen3.8-27B-UD-Q4_K_M.gguf", "Qwen3.8-27B-Q4_0.gguf",
                                          "mmproj-BF16.gguf",           "README.md",
                                          "BF16/Qwen3.8-27B-BF16-00001-of-00002.gguf"};
  auto c = select_gguf(files, "UD-Q4_K_M");
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(c->file, "Qwen3.8-27B-UD-Q4_K_M.gguf");
  EXPECT_FALSE(c->by_ending);
  c = select_gguf(files, "q4_0");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->file, "Qwen3.8-27B-Q4_0.gguf");
  // Only by its ending: reported so.
  c = select_gguf(files, "Q4_K_M");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->file, "Qwen3.8-27B-UD-Q4_K_M.gguf");
  EXPECT_TRUE(c->by_ending);
  // The plain name wins over a longer one ending the same way.
  auto both = files;
  both.push_back("Qwen3.8-27B-Q4_K_M.gguf");
  c = select_gguf(both, "Q4_K_M");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->file, "Qwen3.8-27B-Q4_K_M.gguf");
  auto amb = files;
  amb.push_back("Qwen3.8-27B-XL-Q4_K_M.gguf");
  c = select_gguf(amb, "Q4_K_M");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error_message(),
            "no single GGUF matches :Q4_K_M (files in the repository root: Qwen3.8-27B-Q4_0.gguf, "
            "Qwen3.8-27B-UD-Q4_K_M.gguf, Qwen3.8-27B-XL-Q4_K_M.gguf)");
  c = select_gguf(files, "");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error_message().rfind("select a GGUF with OWNER/REPO:VARIANT (files in the repository root: ", 0), 0u);
  // One GGUF: no variant needed, and its own ending matches.
  c = select_gguf({"Model-Q8_0.gguf", "mmproj-Model-F16.gguf"}, "");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->file, "Model-Q8_0.gguf");
  EXPECT_FALSE(select_gguf({"Model-Q8_0.gguf"}, "missing").ok());
  EXPECT_EQ(select_gguf({"config.json"}, "Q4_0").error_message(),
            "no single GGUF matches :Q4_0 (files in the repository root: none)");
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("splash_hub_test_" + std::to_string(getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(HubCache, LayoutMatchesHuggingfaceHub) {
  TempDir tmp;
  RepoCache cache(tmp.path.string(), "Owner/Name");
  EXPECT_EQ(repo_folder_name("Owner/Name"), "models--Owner--Name");
  EXPECT_EQ(cache.repo_dir(), (tmp.path / "models--Owner--Name").string());
  EXPECT_EQ(cache.lock_path("abc"), (tmp.path / ".locks" / "models--Owner--Name" / "abc.lock").string());
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  EXPECT_FALSE(cache.cached_commit("main"));
  fs::create_directories(fs::path(cache.blob_path("e1")).parent_path());
  std::ofstream(cache.blob_path("e1")) << "hello";
  ASSERT_TRUE(cache.link_snapshot(commit, "sub/dir/f.txt", "e1").ok());
  ASSERT_TRUE(cache.link_snapshot(commit, "config.json", "e1").ok());
  EXPECT_EQ(fs::read_symlink(cache.snapshot_path(commit, "config.json")).string(), "../../blobs/e1");
  EXPECT_EQ(fs::read_symlink(cache.snapshot_path(commit, "sub/dir/f.txt")).string(), "../../../../blobs/e1");
  EXPECT_TRUE(cache.has_snapshot_file(commit, "sub/dir/f.txt"));
  EXPECT_EQ(cache.snapshot_files(commit), (std::vector<std::string>{"config.json", "sub/dir/f.txt"}));
  ASSERT_TRUE(cache.write_ref("main", commit).ok());
  std::ifstream ref(fs::path(cache.repo_dir()) / "refs" / "main");
  std::string text((std::istreambuf_iterator<char>(ref)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, commit);  // bare hash, as huggingface_hub writes it
  EXPECT_EQ(cache.cached_commit("main"), commit);
  EXPECT_EQ(cache.cached_commit(commit), commit);
  // Relinking to another blob replaces the link.
  std::ofstream(cache.blob_path("e2")) << "world";
  ASSERT_TRUE(cache.link_snapshot(commit, "config.json", "e2").ok());
  EXPECT_EQ(fs::read_symlink(cache.snapshot_path(commit, "config.json")).string(), "../../blobs/e2");
}

TEST(HubProgress, Formatting) {
  EXPECT_EQ(format_eta(5), "5s");
  EXPECT_EQ(format_eta(221), "3m41s");
  EXPECT_EQ(format_eta(7500), "2h05m");
  EXPECT_EQ(format_eta(-1), "?");
  EXPECT_EQ(format_progress(512ull << 20, 1024ull << 20, 64ull << 20), "512.00 MiB / 1.00 GiB  50%  64.00 MiB/s  ETA 8s");
  EXPECT_EQ(format_progress(1024, 1024, 0), "1.00 KiB / 1.00 KiB  100%  0 B/s");
  EXPECT_EQ(format_progress(10, 0, 5), "10 B  5 B/s");
}

TEST(HubDownload, EtagHashes) {
  EXPECT_EQ(etag_hash_kind(std::string(64, 'a')), EtagHash::kSha256);
  EXPECT_EQ(etag_hash_kind(std::string(40, 'b')), EtagHash::kGitSha1);
  EXPECT_EQ(etag_hash_kind("xyz"), EtagHash::kNone);
  ContentHasher sha(EtagHash::kSha256, 3);
  sha.update("a", 1);
  sha.update("bc", 2);
  EXPECT_EQ(sha.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // git hash-object of "hello\n"
  ContentHasher git(EtagHash::kGitSha1, 6);
  git.update("hello\n", 6);
  EXPECT_EQ(git.hex_digest(), "ce013625030ba8dba906f756967f9e9ca394464a");
}

// The loader's packable types and identify's list agree: each listed type packs, every other
// GGML quantized type is refused by the packer too.
TEST(HubIdentify, LoadableTypesMatchThePacker) {
  const int64_t rows = 8, cols = 256;
  std::vector<uint8_t> zeros(rows * cols * 8, 0);
  for (int t = 0; t <= static_cast<int>(DType::kQ8_K); ++t) {
    const auto type = static_cast<DType>(t);
    if (!dtype_to_gguf(type)) continue;
    const auto& listed = loadable_tensor_types();
    const bool in_list = std::find(listed.begin(), listed.end(), type) != listed.end();
    auto packed = pack_weights(type, zeros.data(), rows, cols, best_isa_level(), "t");
    EXPECT_EQ(packed.ok(), in_list) << dtype_name(type);
  }
  EXPECT_EQ(ggml_type_name(16), "IQ2_XXS");
  EXPECT_EQ(ggml_type_name(999), "type 999");
}

TEST(HubIdentify, ArchitecturesAndConfigs) {
  ModelConfig c;
  c.architecture = "mamba";
  auto st = check_model_config(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("unsupported architecture 'mamba' (supported: llama"), std::string::npos);
  const std::string base = R"({"architectures":["LlamaForCausalLM"],"hidden_size":64,"num_hidden_layers":2,
    "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":128,"vocab_size":256,
    "max_position_embeddings":512,"rms_norm_eps":1e-5)";
  EXPECT_TRUE(identify_hf_config(base + "}", "c.json").ok()) << identify_hf_config(base + "}", "c.json").error_message();
  auto q = identify_hf_config(base + R"(,"quantization":{"group_size":64,"bits":3}})", "c.json");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error_message().find("3 bits, group 64 (the default) is not supported"), std::string::npos);
  q = identify_hf_config(base + R"(,"quantization":{"group_size":64,"bits":4,"model.layers.0.mlp.down_proj":{"bits":6}}})",
                         "c.json");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error_message().find("module model.layers.0.mlp.down_proj"), std::string::npos);
  EXPECT_TRUE(identify_hf_config(base + R"(,"quantization":{"group_size":32,"bits":8}})", "c.json").ok());
  auto bad = identify_hf_config(R"({"architectures":["MambaForCausalLM"]})", "c.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("MambaForCausalLM"), std::string::npos);
}

TEST(HubIdentify, GgufHeaderScanNeedsOnlyThePrefix) {
  // A header with a few metadata values and two tensors, then fake tensor data.
  std::vector<uint8_t> f;
  auto u32 = [&](uint32_t v) { f.insert(f.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4); };
  auto u64 = [&](uint64_t v) { f.insert(f.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    f.insert(f.end(), s.begin(), s.end());
  };
  u32(0x46554747);
  u32(3);
  u64(2);  // tensors
  u64(2);  // metadata
  str("general.architecture");
  u32(8);
  str("llama");
  str("tokenizer.ggml.tokens");
  u32(9);
  u32(8);
  u64(3);
  str("a");
  str("b");
  str("c");
  const size_t meta_end = f.size();
  str("blk.0.w");
  u32(2);
  u64(32);
  u64(2);
  u32(16);  // IQ2_XXS
  u64(0);
  str("blk.1.w");
  u32(1);
  u64(32);
  u32(0);
  u64(64);
  const size_t header_end = f.size();
  f.resize(header_end + 4096, 0);
  const std::span<const uint8_t> all(f);
  for (size_t cut : {size_t{10}, size_t{30}, meta_end - 1, header_end - 1}) {
    auto s = scan_gguf_header(all.first(cut), f.size(), "x.gguf");
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_FALSE(s->complete) << cut;
    EXPECT_GT(s->bytes_needed, cut);
  }
  auto s = scan_gguf_header(all.first(header_end), f.size(), "x.gguf");
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(s->complete);
  EXPECT_EQ(s->metadata_end, meta_end);
  ASSERT_EQ(s->tensors.size(), 2u);
  EXPECT_EQ(s->tensors[0].type_id, 16u);
  // A length past the file's end is malformed, not "fetch more".
  EXPECT_FALSE(scan_gguf_header(all.first(header_end), header_end - 8, "x.gguf").ok());
  std::vector<uint8_t> not_gguf(64, 'x');
  EXPECT_FALSE(scan_gguf_header(not_gguf, 64, "x.gguf").ok());
}

TEST(HubDraftRegistry, MatchesByShapeAndOverride) {
  ModelConfig c;
  c.architecture = "qwen3";
  c.n_layer = 36;
  c.n_embd = 4096;
  const DraftEntry* e = find_draft(c);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->family, "Qwen3-8B");
  c.n_embd = 1024;
  EXPECT_EQ(find_draft(c), nullptr);
  for (const DraftEntry& d : draft_registry()) EXPECT_TRUE(check_repo_id(d.draft_repo).ok()) << d.draft_repo;
  HubSettings s;
  s.offline = true;
  auto none = resolve_draft(c, "", s);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  TempDir tmp;
  auto local = resolve_draft(c, tmp.path.string(), s);
  ASSERT_TRUE(local.ok()) << local.error_message();
  EXPECT_EQ((*local)->path, tmp.path.string());
  EXPECT_FALSE(resolve_draft(c, "not a repo", s).ok());
}

TEST(HubResolve, SafetensorsFilesNeeded) {
  const std::vector<std::string> files = {"README.md", "config.json", "tokenizer.json", "model-00002-of-00002.safetensors",
                                          "model-00001-of-00002.safetensors", "model.safetensors.index.json",
                                          "sub/model.safetensors", "chat_template.jinja"};
  EXPECT_EQ(safetensors_files_needed(files),
            (std::vector<std::string>{"config.json", "tokenizer.json", "chat_template.jinja",
                                      "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors"}));
}

}  // namespace
}  // namespace splash::hub
