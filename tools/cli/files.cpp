// SPDX-License-Identifier: Apache-2.0
#include "files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "input_error.hpp"

namespace kvinfer::cli {
namespace fs = std::filesystem;

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

// Closes a descriptor on every path out of a scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string mib(std::int64_t bytes) {
  return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20));
}

}  // namespace

RegularFile check_regular_file(const std::string& flag, const std::string& path, std::int64_t max_bytes) {
  if (path.empty()) throw InputError(fmt::format("{}: empty path", flag));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT) throw InputError(fmt::format("{} = {}: cannot open the file: no such file", flag, path));
    throw InputError(fmt::format("{} = {}: cannot open the file: {}", flag, path, errno_text(e)));
  }
  if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{} = {}: is a directory, not a file", flag, path));
  if (!S_ISREG(st.st_mode)) {
    throw InputError(fmt::format("{} = {}: is {}, not a regular file", flag, path, file_kind(st.st_mode)));
  }
  if (st.st_size > max_bytes) {
    throw InputError(fmt::format("{} = {}: {} ({} bytes), more than the limit of {}", flag, path,
                                 mib(st.st_size), st.st_size, mib(max_bytes)));
  }
  return {path, std::int64_t(st.st_size), max_bytes};
}

std::string read_regular_file(const std::string& flag, const RegularFile& file) {
  // O_NONBLOCK: should the path have become a FIFO since the check, open must not wait
  // for a writer; fstat below then refuses it.
  Fd f{::open(file.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (f.fd < 0) {
    throw InputError(fmt::format("{} = {}: cannot open the file: {}", flag, file.path, errno_text(errno)));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw InputError(
        fmt::format("{} = {}: is {}, not a regular file", flag, file.path, file_kind(st.st_mode)));
  }
  std::string text;
  text.resize(std::size_t(std::min<std::int64_t>(st.st_size, file.max_bytes)) + 1);
  std::size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (std::int64_t(text.size()) > file.max_bytes) {
        throw InputError(
            fmt::format("{} = {}: more than the limit of {}", flag, file.path, mib(file.max_bytes)));
      }
      text.resize(std::min<std::size_t>(text.size() * 2, std::size_t(file.max_bytes) + 1));
    }
    const ssize_t n = ::read(f.fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(fmt::format("{} = {}: reading failed: {}", flag, file.path, errno_text(errno)));
    }
    if (n == 0) break;
    got += std::size_t(n);
  }
  text.resize(got);
  return text;
}

OutputTarget check_output_path(const std::string& flag, const std::string& path) {
  if (path.empty()) throw InputError(fmt::format("{}: empty path", flag));
  OutputTarget t{flag, path, fs::path(path)};
  // Follow the chain of links by hand: fs::canonical fails on a dangling link, and
  // weakly_canonical would stop at it (and the rename then replace the link itself).
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(t.file.c_str(), &st) != 0) {
      const int e = errno;
      if (e != ENOENT) throw InputError(fmt::format("{} = {}: {}", flag, path, errno_text(e)));
      break;  // a new file
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops >= 40) throw InputError(fmt::format("{} = {}: too many levels of symbolic links", flag, path));
      const fs::path target = fs::read_symlink(t.file);
      t.file = target.is_absolute() ? target : t.file.parent_path() / target;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      throw InputError(fmt::format("{} = {}: is a directory (give a file name)", flag, path));
    }
    if (!S_ISREG(st.st_mode)) {
      throw InputError(fmt::format("{} = {}{}: is {}; {} writes only a regular file or a new one", flag, path,
                                   t.file == fs::path(path) ? "" : " (-> " + t.file.string() + ")",
                                   file_kind(st.st_mode), flag));
    }
    if (::access(t.file.c_str(), W_OK) != 0) {
      throw InputError(fmt::format("{} = {}: the file is not writable: {}", flag, path, errno_text(errno)));
    }
    t.exists = true;
    t.mode = st.st_mode & 07777;
    break;
  }
  const fs::path dir = t.file.has_parent_path() ? t.file.parent_path() : fs::path(".");
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0) {
    throw InputError(fmt::format("{} = {}: directory {} does not exist", flag, path, dir.string()));
  }
  if (!S_ISDIR(ds.st_mode)) {
    throw InputError(
        fmt::format("{} = {}: {} is {}, not a directory", flag, path, dir.string(), file_kind(ds.st_mode)));
  }
  // Creating a file is the only sure test: access(W_OK) says yes to root on a
  // read-only file system's directory too.
  std::string probe = (dir / ("." + t.file.filename().string() + ".probe-XXXXXX")).string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    throw InputError(
        fmt::format("{} = {}: cannot create a file in {}: {}", flag, path, dir.string(), errno_text(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return t;
}

void write_file_atomic(const OutputTarget& target, std::string_view content) {
  const OutputTarget t = check_output_path(target.flag, target.path);
  const fs::path dir = t.file.has_parent_path() ? t.file.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + t.file.filename().string() + ".tmp-XXXXXX")).string();
  Fd f{::mkstemp(tmp.data())};
  if (f.fd < 0) {
    throw std::runtime_error(fmt::format("{} = {}: cannot create a file in {}: {}", t.flag, t.path,
                                         dir.string(), errno_text(errno)));
  }
  const auto fail = [&](const char* what) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return std::runtime_error(
        fmt::format("{} = {}: {} {} failed: {}", t.flag, t.path, what, tmp, errno_text(e)));
  };
  for (std::size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(f.fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw fail("writing");
    }
    done += std::size_t(n);
  }
  // mkstemp makes the file 0600: a replaced file keeps its mode, a new one gets what
  // the umask leaves of 0666, as any file a program creates.
  mode_t mode = t.mode;
  if (!t.exists) {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  if (::fchmod(f.fd, mode) != 0) throw fail("setting the mode of");
  if (::fsync(f.fd) != 0) throw fail("flushing");
  const int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) throw fail("closing");
  if (::rename(tmp.c_str(), t.file.c_str()) != 0) throw fail("renaming");
}

}  // namespace kvinfer::cli
