// Helpers for the fuzz targets: the input as a file (parsers that open paths read it from
// a memfd through /proc/self/fd), and running a parser where moetrain::Error is the
// expected outcome for bad input; anything else (a crash, a sanitizer report, another
// exception type) is a finding.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "moetrain/error.h"

namespace moetrain::fuzz {

// A memory file holding the input; path() names it for code that opens files.
class InputFile {
  public:
    InputFile(const uint8_t* data, size_t size) {
        fd_ = ::memfd_create("fuzz-input", 0);
        if (fd_ < 0) std::abort();
        for (size_t done = 0; done < size;) {
            ssize_t n = ::write(fd_, data + done, size - done);
            if (n <= 0) std::abort();
            done += static_cast<size_t>(n);
        }
    }
    ~InputFile() { ::close(fd_); }
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;
    std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

  private:
    int fd_ = -1;
};

template <typename F>
void expect_only_errors(F&& parse) {
    try {
        parse();
    } catch (const moetrain::Error&) {  // NOLINT(bugprone-empty-catch): a refusal is a pass
    }
}

}  // namespace moetrain::fuzz
