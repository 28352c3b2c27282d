// Output files. A regular file (or a missing one) is written atomically: a temporary file beside
// it, flushed, then renamed over it, so a reader never sees a half-written file (result files,
// the ceilings cache, the gate's outputs). A symbolic link to a regular file keeps the link: its
// target is replaced. Anything else (a device such as /dev/null, a FIFO, a terminal, /dev/stdout
// and the /proc/self/fd links, or links to them) is opened and written in place, never replaced.
#pragma once

#include <string>

namespace fa {

struct OutputTarget {
  std::string path;    // where the bytes go: the file itself, or the end of its link chain
  bool atomic = true;  // temp + rename (regular or missing); false: written in place
};

// Follows symbolic links (at most 40) to what `path` names. Never throws.
OutputTarget resolve_output(const std::string& path);

// "" when `path` can be written as write_file_atomically would write it, else the problem, e.g.
// "is a directory", "/x is not a directory", "cannot create files in /ro: Permission denied".
// Checks without writing anything (a FIFO is not opened).
std::string output_problem(const std::string& path);

// Writes `content` to `path` as described above; creates missing parent folders. Throws
// std::runtime_error naming the path and the system's reason (e.g. "No space left on device").
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace fa
