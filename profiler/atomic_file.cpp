#include "profiler/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace fa {
namespace {

namespace fs = std::filesystem;

bool under_proc(const fs::path& p) {
  const std::string s = p.lexically_normal().string();
  return s.rfind("/proc/", 0) == 0;
}

std::string errno_text(int e) {
  return std::strerror(e);
}

// Writes all of `content` to an open descriptor; false (errno set) on failure.
bool write_all(int fd, const std::string& content) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

void write_in_place(const std::string& shown, const std::string& path, const std::string& content) {
  // O_APPEND: /dev/stdout redirected to a file continues after what was printed before.
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(shown + ": cannot open for writing: " + errno_text(errno));
  const bool ok = write_all(fd, content);
  const int e = errno;
  if (::close(fd) != 0 && ok)
    throw std::runtime_error(shown + ": write failed: " + errno_text(errno));
  if (!ok) throw std::runtime_error(shown + ": write failed: " + errno_text(e));
}

}  // namespace

OutputTarget resolve_output(const std::string& path) {
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    // /dev/stdout -> /proc/self/fd/1 -> (a pipe, a terminal, or the file the shell opened):
    // links into /proc stand for open descriptors, which are written, never replaced.
    if (under_proc(p)) return {p.string(), false};
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(p, ec);
    if (ec || st.type() == fs::file_type::not_found) return {p.string(), true};
    if (st.type() == fs::file_type::symlink) {
      fs::path next = fs::read_symlink(p, ec);
      if (ec) return {p.string(), true};
      p = next.is_absolute() ? next : p.parent_path() / next;
      continue;
    }
    // Devices, FIFOs and sockets are written in place; a regular file is replaced (and a
    // directory is refused by the writer).
    const auto type = st.type();
    const bool special = type == fs::file_type::character || type == fs::file_type::block ||
                         type == fs::file_type::fifo || type == fs::file_type::socket;
    return {p.string(), !special};
  }
  return {p.string(), true};  // a link loop: the rename will say so
}

std::string output_problem(const std::string& path) {
  if (path.empty()) return "empty path";
  const OutputTarget t = resolve_output(path);
  const fs::path target(t.path);
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  if (!t.atomic) {
    if (::access(t.path.c_str(), W_OK) != 0) return "not writable: " + errno_text(errno);
    return "";
  }
  if (st.type() == fs::file_type::directory) return "is a directory";
  if (st.type() == fs::file_type::regular && ::access(t.path.c_str(), W_OK) != 0) {
    return "not writable: " + errno_text(errno);
  }
  // The temporary file is made in the target's folder, or in the nearest folder that exists
  // (the missing ones are created).
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  while (true) {
    const fs::file_status ds = fs::status(dir, ec);
    if (ds.type() == fs::file_type::directory) break;
    if (ds.type() != fs::file_type::not_found) return dir.string() + " is not a directory";
    if (!dir.has_parent_path() || dir.parent_path() == dir) {
      dir = ".";
      break;
    }
    dir = dir.parent_path();
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return "cannot create files in " + dir.string() + ": " + errno_text(errno);
  }
  return "";
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const OutputTarget t = resolve_output(path);
  const fs::path target(t.path);
  std::error_code ec;
  if (!t.atomic) {
    write_in_place(path, t.path, content);
    return;
  }
  if (fs::is_directory(target, ec)) throw std::runtime_error(path + ": is a directory");
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      throw std::runtime_error(path + ": cannot create " + target.parent_path().string() + ": " +
                               ec.message());
  }
  const std::string tmp = target.string() + ".tmp." + std::to_string(::getpid());
  // A file that exists keeps its permissions; a new one gets 0666 less the umask.
  mode_t mode = 0666;
  struct stat old {};
  const bool existed = ::stat(t.path.c_str(), &old) == 0;
  if (existed) mode = old.st_mode & 07777;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error(tmp + ": cannot open for writing: " + errno_text(errno));
  if (existed) (void)::fchmod(fd, mode);
  bool ok = write_all(fd, content);
  int e = errno;
  if (ok && ::close(fd) != 0) {
    ok = false;
    e = errno;
  } else if (!ok) {
    ::close(fd);
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": write failed: " + errno_text(e));
  }
  if (::rename(tmp.c_str(), t.path.c_str()) != 0) {
    e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": rename failed: " + errno_text(e));
  }
}

}  // namespace fa
