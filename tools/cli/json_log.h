// The --log-json file of a training run: one JSON object per line, written with checked
// POSIX calls (every write and the close), so that a full or failing disk is reported and
// never passes silently.
#pragma once

#include <string>

namespace moetrain::cli {

class JsonLog {
  public:
    // Opens (appending when `append`, else truncating) or throws one line naming the file.
    JsonLog(std::string path, bool append);
    ~JsonLog();
    JsonLog(const JsonLog&) = delete;
    JsonLog& operator=(const JsonLog&) = delete;

    // Writes `line` and a newline; returns "" or the reason the write failed (strerror).
    std::string write_line(const std::string& line);
    // Closes the file; returns "" or the reason the close failed.
    std::string close();
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    int fd_ = -1;
};

}  // namespace moetrain::cli
