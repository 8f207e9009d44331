// The cooperative stop of moetrain/stop.h: a request makes the long library operations throw
// moetrain::Stopped at their next bounded unit of work, and they leave nothing behind (the
// CLI's SIGINT / SIGTERM handler makes the request; tests/cli/signal_tests.py drives that).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "io/atomic_dir.h"
#include "moetrain/backend.h"
#include "moetrain/checkpoint.h"
#include "moetrain/config.h"
#include "moetrain/hf.h"
#include "moetrain/model.h"
#include "moetrain/stop.h"
#include "moetrain/tokenizer.h"
#include "test_checkpoint_util.h"

using namespace moetrain;
using moetrain::testing::spit;
using moetrain::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Runs `f` with a stop request of code 15 pending; returns the Stopped it threw (code 0 and
// an empty message when it threw none). The request is cleared afterwards.
template <typename F>
std::pair<int, std::string> stopped_by(F&& f) {
    request_stop(15);
    std::pair<int, std::string> got{0, ""};
    try {
        f();
    } catch (const Stopped& e) {
        got = {e.code(), e.what()};
    }
    clear_stop();
    return got;
}

}  // namespace

TEST_CASE("stop: a request is recorded, reported by check_stop and cleared") {
    clear_stop();
    CHECK(stop_requested() == 0);
    CHECK_NOTHROW(check_stop("nothing"));
    CHECK(request_stop(2) == 0);
    CHECK(request_stop(15) == 2);  // the second request sees the first: the CLI exits at once
    CHECK(stop_requested() == 15);
    const auto [code, what] = stopped_by([] { check_stop("the test"); });
    CHECK(code == 15);
    CHECK(what == "during the test");
    CHECK(stop_requested() == 0);
    try {  // a Stopped is an Error: code that catches errors unwinds it the same way
        request_stop(2);
        check_stop("x");
    } catch (const Error& e) {
        CHECK(dynamic_cast<const Stopped*>(&e) != nullptr);
    }
    clear_stop();
}

TEST_CASE("stop: tokenizer training stops before writing anything") {
    TempDir tmp;
    std::string text;
    for (int i = 0; i < 2000; ++i)
        text += "the king and the queen spoke " + std::to_string(i) + "\n";
    spit(tmp.file("corpus.txt"), text);
    BpeTrainOptions o;
    o.vocab_size = 400;
    CHECK(!train_byte_level_bpe({tmp.file("corpus.txt")}, o).empty());  // completes unasked
    const auto [code, what] =
        stopped_by([&] { train_byte_level_bpe({tmp.file("corpus.txt")}, o); });
    CHECK(code == 15);
    CHECK(what.find("tokenizer train") != std::string::npos);
}

TEST_CASE("stop: export and import stop between tensors and leave no directory") {
    TempDir tmp;
    auto dev = open_device("cpu");
    // A Llama layout (one that transformers computes exactly, so export_hf takes it).
    const ModelConfig c = parse_config(
        R"({"vocab_size": 260, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
            "max_seq_len": 32, "norm": "rmsnorm", "pos": "rope", "ffn": "swiglu", "d_ff": 48,
            "bias": false})");
    Model model(*dev, c);
    model.init_weights(1);
    const std::string ck = tmp.file("ck");
    save_checkpoint(ck, model, nullptr, TrainState{});

    const std::string out = tmp.file("hf");
    const auto [code, what] = stopped_by([&] { export_hf(ck, out, {}); });
    CHECK(code == 15);
    CHECK(what.find("during export") != std::string::npos);
    CHECK(what.find("nothing was written to " + out) != std::string::npos);
    CHECK(fs::is_directory(ck));
    CHECK(std::distance(fs::directory_iterator(tmp.path), fs::directory_iterator{}) == 1);

    // A temporary directory that a killed export left (its process is gone) is removed by the
    // next export into the same parent, which reports it.
    const std::string stale = io::atomic_tmp_name(out, 999999999);
    {
        io::AtomicDirWriter left(out);  // made with the marker, then renamed as a dead pid's
        fs::rename(left.tmp_dir(), stale);
    }
    REQUIRE(fs::is_directory(stale));
    const HfResult r = export_hf(ck, out, {});
    CHECK(!fs::exists(stale));
    bool reported = false;
    for (const std::string& n : r.notes)
        reported |= n.find("interrupted runs") != std::string::npos;
    CHECK(reported);

    const std::string back = tmp.file("back");
    const auto [icode, iwhat] = stopped_by([&] { import_hf(out, back, {}); });
    CHECK(icode == 15);
    CHECK(iwhat.find("during import") != std::string::npos);
    CHECK(!fs::exists(back));
    CHECK(import_hf(out, back, {}).config.n_layers == c.n_layers);  // completes unasked
}
