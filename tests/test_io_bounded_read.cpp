// The one reader of user files (models/io/file.h): a FIFO with no writer, a device and a file
// above its kind's limit end in one line naming the file (and the limit), at once; a file
// that shrinks under a reader, a shard truncated under a token stream included.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "io/file.h"
#include "moetrain/shards.h"
#include "test_checkpoint_util.h"

using namespace moetrain;
using namespace moetrain::testing;

namespace {

constexpr io::FileKind kSmall{"small file", 16};

double seconds_of(const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("io: the reader refuses FIFOs without blocking, devices, directories") {
    TempDir tmp;
    const std::string fifo = tmp.file("fifo.json");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string msg;
    // No writer ever opens the FIFO: a blocking open would hang here forever.
    const double s =
        seconds_of([&] { msg = error_of([&] { io::read_file(fifo, io::kConfigFile); }); });
    CHECK(msg == "config file " + fifo + ": not a regular file");
    CHECK(s < 5.0);
    CHECK(error_of([&] { io::read_file("/dev/zero", io::kTokenizerFile); }) ==
          "tokenizer file /dev/zero: not a regular file");
    CHECK(error_of([&] { io::read_file(tmp.path.string(), io::kCheckpointStateFile); }) ==
          "checkpoint file " + tmp.path.string() + ": not a regular file");
    // A symlink to a device is the device (fstat of the opened descriptor, not of the name).
    const std::string link = tmp.file("z.json");
    std::filesystem::create_symlink("/dev/zero", link);
    CHECK(error_of([&] { io::read_file(link, io::kTokenizerFile); }) ==
          "tokenizer file " + link + ": not a regular file");
    CHECK(error_of([&] {
              io::read_file(tmp.file("none"), io::kIndexFile);
          }).rfind("index file " + tmp.file("none") + ": cannot open: ", 0) == 0);
}

TEST_CASE("io: the reader caps each kind and names the limit") {
    TempDir tmp;
    spit(tmp.file("16"), std::string(16, 'a'));
    spit(tmp.file("17"), std::string(17, 'a'));
    CHECK(io::read_file(tmp.file("16"), kSmall) == std::string(16, 'a'));
    CHECK(error_of([&] { io::read_file(tmp.file("17"), kSmall); }) ==
          "small file " + tmp.file("17") +
              ": 17 bytes, more than the limit of 16 bytes for a small file");
    // A sparse file just above 64 MiB: refused from its size, before a byte is read.
    const std::string big = tmp.file("config.json");
    spit(big, "{}");
    std::filesystem::resize_file(big, io::kMaxJsonFileBytes + 1);
    CHECK(error_of([&] { io::read_file(big, io::kConfigFile); }) ==
          "config file " + big +
              ": 67108865 bytes, more than the limit of 64 MiB for a config file");
}

TEST_CASE("io: a file that shrinks under the reader says so") {
    TempDir tmp;
    const std::string path = tmp.file("data.txt");
    spit(path, std::string(1000, 'x'));
    const io::InputFile f(path, io::kTextPiecesFile);
    CHECK(f.read_range(990, 2000) == std::string(10, 'x'));
    std::filesystem::resize_file(path, 500);
    CHECK(error_of([&] { f.read_range(400, 600); }) ==
          "--data file " + path +
              ": changed while being read: it now has 500 bytes, it had 1000 when opened (byte 500 "
              "is gone)");
}

TEST_CASE("io: a shard truncated under its token stream ends in one line, not SIGBUS") {
    TempDir tmp;
    const std::string path = tmp.file("data_train_000000.bin");
    {
        ShardWriter w(path, 2);
        std::vector<int32_t> ids(200000);
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 50);
        w.append(ids.data(), ids.size());
        w.finish();
    }
    const TokenStream s = open_shards({path}, 50);
    std::vector<int32_t> out(1000);
    s->read(199000, 1000, out.data());
    CHECK(out[999] == 199999 % 50);
    std::filesystem::resize_file(path, 4096);
    const std::string msg = error_of([&] { s->read(100000, 1000, out.data()); });
    CHECK(msg.rfind("shard " + path + ": changed while being read: it now has 4096 bytes", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
}
