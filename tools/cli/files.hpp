// SPDX-License-Identifier: Apache-2.0
// The files the `kvinfer` commands read and write, checked before any work is done.
//
// Input (--trace-file): a regular file (a symlink to one is followed) within a size
// limit, its kind and size taken from stat before a byte is read, so that a device
// (/dev/zero), a FIFO or a directory is named as such instead of being read.
//
// Output (--json): written only to a regular file or a new path. A symbolic link is
// followed, as a shell's `>` follows it: the file it points to (or would create) is
// written and the link stays. Devices, FIFOs, sockets and directories are refused.
// The target's directory is checked writable by creating a file in it before the
// run; the write itself is atomic: a temporary file in that same directory, flushed
// to disk, then renamed over the target, so that a reader sees the old file or the
// new one, never a part.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kvinfer::cli {

// "a directory", "a character device", ... for the file type bits of `mode`.
std::string file_kind(mode_t mode);

struct RegularFile {
  std::string path;
  std::int64_t size = 0;
  std::int64_t max_bytes = 0;
};

// Throws InputError naming `flag` unless `path` is a regular file of at most
// `max_bytes` bytes.
RegularFile check_regular_file(const std::string& flag, const std::string& path, std::int64_t max_bytes);
// Reads the whole file, at most its max_bytes (a file that grew past it is refused).
std::string read_regular_file(const std::string& flag, const RegularFile& file);

struct OutputTarget {
  std::string flag, path;      // as given
  std::filesystem::path file;  // after following symlinks: what is replaced or created
  bool exists = false;
  mode_t mode = 0;  // of the existing file, kept by the replacement
};

// Resolves `path` and checks that it can be written (see above); throws InputError.
OutputTarget check_output_path(const std::string& flag, const std::string& path);
// Writes `content` to the target atomically; checks the path again first (it may have
// changed during the run). Throws InputError for a path that is no longer writable,
// std::runtime_error when writing fails (a full disk).
void write_file_atomic(const OutputTarget& target, std::string_view content);

}  // namespace kvinfer::cli
