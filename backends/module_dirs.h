// Where loadable modules (backends, communicators) are looked for: the directories of
// $MOETRAIN_BACKEND_PATH (':'-separated, searched first), then the directory of libmoetrain.so.
#pragma once

#include <string>
#include <vector>

namespace moetrain {

std::vector<std::string> module_search_dirs();

}  // namespace moetrain
