// The placements behind open_row_source (row_source.h), and the file helpers they share.
#pragma once

#include <chrono>
#include <memory>

#include "ple/row_source.h"

namespace splash::ple {

Result<std::unique_ptr<RowSource>> open_resident_source(const TableLayout& layout);
Result<std::unique_ptr<RowSource>> open_mmap_source(const TableLayout& layout);
Result<std::unique_ptr<RowSource>> open_ssd_source(const TableLayout& layout, const RowSourceOptions& options);

// Reads up to n bytes at offset, retrying short reads; returns the bytes read (fewer only at end of
// file) or an Error naming the file.
Result<uint64_t> pread_upto(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path);

// An Error naming the first row id past the table, if any.
Status check_rows(const TableLayout& layout, std::span<const uint64_t> rows, std::span<float> out);

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace splash::ple
