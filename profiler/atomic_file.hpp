// Files written atomically: a temporary file beside the target, flushed, then renamed, so a
// reader never sees a half-written file (result files, the ceilings cache).
#pragma once

#include <string>

namespace fa {

// Creates the parent folder. Throws std::runtime_error naming the path.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace fa
