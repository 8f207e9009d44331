// `moetrain tokenize`: text files (one document each) or JSONL files (one document per line's
// "text") to llm.c-format token shards, each document preceded by the end-of-text id as llm.c
// does. The files are cut into pieces (text_pieces.h) that are tokenised in parallel and
// written in input order, so the shards are the same for any thread count; every shard appears
// under its final name only when complete (moetrain/shards.h).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "io/out_manifest.h"
#include "common.h"
#include "io/atomic_dir.h"
#include "io/file.h"
#include "number_options.h"
#include "moetrain/error.h"
#include "moetrain/shards.h"
#include "moetrain/stop.h"
#include "ordered_parallel.h"
#include "run_guards.h"
#include "text_pieces.h"
#include "tokenizer_choice.h"

namespace moetrain::cli {
namespace {

namespace fs = std::filesystem;

struct TokenizeArgs {
    TokenizerChoice tokenizer;
    std::vector<std::string> data;
    std::string out, prefix = "data";
    int64_t shard_tokens = 100'000'000, val_tokens = 0, eot = -1;
    int threads = 0;
    int64_t piece_bytes = 4 << 20;
    bool quiet = false;
};

struct Encoded {
    std::vector<int32_t> ids;
    int64_t bytes = 0, documents = 0;
};

// One piece of a file: a text file's piece (the end-of-text id before the first), or whole
// lines of a JSONL file, one document each.
Encoded encode_piece(const std::string& path, const TextPiece& piece, const Tokenizer& tok,
                     int32_t eot) {
    Encoded e;
    const std::string text = read_text_piece(path, piece);
    e.bytes = static_cast<int64_t>(text.size());
    auto add_document = [&](std::string_view doc) {
        e.ids.push_back(eot);
        tok.encode(doc, e.ids);
        ++e.documents;
    };
    if (!piece.jsonl) {
        if (piece.starts_document) {
            e.ids.push_back(eot);
            ++e.documents;
        }
        tok.encode(text, e.ids);
        return e;
    }
    size_t pos = 0;
    while (pos < text.size()) {
        size_t eol = std::min(text.find('\n', pos), text.size());
        std::string_view row(text.data() + pos, eol - pos);
        if (row.find_first_not_of(" \t\r") != std::string_view::npos) {
            nlohmann::json j = nlohmann::json::parse(row, nullptr, false);
            if (!(j.is_object() && j.contains("text") && j["text"].is_string()))
                fail(path, " line ", line_number_at(path, piece.begin + pos),
                     ": not a JSON object with a \"text\" string");
            add_document(j["text"].get_ref<const std::string&>());
        }
        pos = eol + 1;
    }
    return e;
}

// Cuts the token stream into shards: the first val_tokens go to "_val_" shards, the rest to
// "_train_" shards, each at most shard_tokens long, numbered in order. They are written into
// `stage` and moved to --out by publish() once the whole corpus is in them; publish() then
// writes the manifest of --out (what a later tokenize may replace) listing them.
class ShardSink {
  public:
    ShardSink(const TokenizeArgs& a, std::string stage, int token_bytes,
              const io::ordered_json& settings)
        : a_(a),
          stage_(std::move(stage)),
          token_bytes_(token_bytes),
          val_left_(a.val_tokens),
          settings_(settings) {}
    void append(const int32_t* ids, size_t n) {
        while (n > 0) {
            if (!cur_) open();
            int64_t room = a_.shard_tokens - cur_->tokens();
            if (in_val_) room = std::min(room, val_left_);
            size_t take = static_cast<size_t>(std::min<int64_t>(room, static_cast<int64_t>(n)));
            cur_->append(ids, take);
            ids += take;
            n -= take;
            total_ += static_cast<int64_t>(take);
            if (in_val_) val_left_ -= static_cast<int64_t>(take);
            if (cur_->tokens() == a_.shard_tokens || (in_val_ && val_left_ == 0)) close();
        }
    }
    void finish() {
        if (cur_) close();
    }
    int shards() const { return index_; }
    int64_t total() const { return total_; }
    // Moves the finished shards from the stage to --out (renames in one file system), then
    // writes the manifest that lists them.
    // A failed move takes back the shards already moved: --out never holds part of the set.
    void publish() const {
        std::vector<io::ManifestEntry> written;
        for (const std::string& name : names_) {
            const std::string from = stage_ + "/" + name, to = a_.out + "/" + name;
            if (std::rename(from.c_str(), to.c_str()) != 0) {
                const std::string why = std::strerror(errno);
                for (const io::ManifestEntry& e : written) {
                    std::error_code ec;
                    fs::remove(fs::path(a_.out) / e.name, ec);
                }
                fail("tokenize: cannot move ", from, " to ", to, ": ", why,
                     "; no shard was written to ", a_.out);
            }
            written.push_back(io::manifest_entry(a_.out, name));
        }
        io::fsync_dir(a_.out);
        io::write_output_manifest(a_.out, "tokenize", settings_, written, true);
    }

  private:
    void open() {
        in_val_ = val_left_ > 0;
        char name[64];
        std::snprintf(name, sizeof name, "_%s_%06d.bin", in_val_ ? "val" : "train", index_);
        names_.push_back(a_.prefix + name);
        cur_ = std::make_unique<ShardWriter>(stage_ + "/" + names_.back(), token_bytes_);
    }
    void close() {
        try {
            cur_->finish();
        } catch (const Error& e) {
            fail(e.what(), "; tokenize stopped at shard ", names_.back(),
                 ": no shard was written to ", a_.out);
        }
        cur_.reset();
        ++index_;
    }
    const TokenizeArgs& a_;
    std::string stage_;
    std::vector<std::string> names_;  // shard file names, in order
    int token_bytes_;
    int64_t val_left_, total_ = 0;
    bool in_val_ = false;
    int index_ = 0;
    std::unique_ptr<ShardWriter> cur_;
    io::ordered_json settings_;
};

// --out resolved and checked against the inputs; an existing one may only hold an earlier
// tokenize's output (its manifest lists every file, unchanged), which is removed first with a
// line saying what goes: shards of another corpus never stay beside the new ones.
std::string prepare_out_dir(const TokenizeArgs& a, const io::ordered_json& settings) {
    std::vector<NamedPath> inputs = {{"--tokenizer", a.tokenizer.file()}};
    for (const std::string& d : a.data) inputs.push_back({"--data", d});
    const std::string out = guard_output({"--out", a.out}, inputs, OutputKind::dir);
    MT_CHECK(!a.prefix.empty() && a.prefix.find('/') == std::string::npos, "--prefix ", a.prefix,
             ": a shard name prefix is a plain name, without '/'");
    // A killed run's hidden stage (.tokenize.tmp-PID, below) goes first: it is ours, not a
    // foreign file.
    if (const int stale = io::remove_stale_tmp_dirs(out); stale > 0)
        std::printf("tokenize: removed %d temporary directories of interrupted runs from %s\n",
                    stale, out.c_str());
    const io::EarlierOutput earlier = io::read_earlier_output(out, "tokenize", "tokenize: --out");
    if (!earlier.files.empty() || earlier.has_manifest) {
        const char* which = !earlier.complete              ? "unfinished"
                            : earlier.settings == settings ? "same-settings"
                                                           : "different-settings";
        std::printf("tokenize: replaces the %s output of an earlier tokenize in %s (%s)\n", which,
                    out.c_str(), io::describe_files(earlier.files).c_str());
        io::remove_earlier_output(out, earlier);
    }
    std::error_code ec;
    fs::create_directories(out, ec);
    MT_CHECK(fs::is_directory(out, ec), "--out ", a.out, ": cannot create the directory");
    return out;
}

void run_tokenize(const TokenizeArgs& args) {
    TokenizeArgs a = args;
    auto tok = a.tokenizer.load();
    std::optional<int32_t> eot =
        a.eot >= 0 ? std::optional<int32_t>(static_cast<int32_t>(a.eot)) : tok->eot_id();
    MT_CHECK(eot, "tokenizer \"", a.tokenizer.spec,
             "\" has no end-of-text token to separate documents; give --eot ID");
    std::vector<std::string> files;
    for (const std::string& d : a.data)
        for (std::string& f : expand_file_spec(d, "")) files.push_back(std::move(f));
    int64_t total_bytes = 0;
    for (const std::string& f : files) {
        std::error_code ec;
        total_bytes += static_cast<int64_t>(fs::file_size(f, ec));
    }
    io::ordered_json settings = {{"tokenizer", a.tokenizer.spec},
                                 {"tokenizer_pattern", a.tokenizer.pattern},
                                 {"eot", *eot},
                                 {"prefix", a.prefix},
                                 {"shard_tokens", a.shard_tokens},
                                 {"val_tokens", a.val_tokens},
                                 {"data", files}};
    a.out = prepare_out_dir(a, settings);

    const int threads = a.threads > 0
                            ? a.threads
                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    const int token_bytes = shard_token_bytes(std::max<int64_t>(tok->vocab_size(), *eot + 1));
    const std::vector<TextPiece> pieces =
        plan_text_pieces(files, tok->encodes_line_cuts_apart(), a.piece_bytes);
    // The shards go to a hidden temporary directory --out/.tokenize.tmp-<pid>, which `train`
    // never reads, and come out of it only when the corpus is complete: a stopped or failed
    // run leaves no shard. The directory is removed on the way out; one left by a killed run
    // is removed by the next tokenize into the same --out.
    const io::AtomicDirWriter stage(a.out + "/.tokenize");
    stop_cooperatively();  // a stop ends the run before its next piece of text
    ShardSink sink(a, stage.tmp_dir(), token_bytes, settings);
    const auto t0 = std::chrono::steady_clock::now();
    int64_t done_bytes = 0, documents = 0;
    double last_report = 0;
    ordered_parallel<Encoded>(
        pieces.size(), threads, 4 * static_cast<size_t>(threads),
        [&](size_t i) { return encode_piece(files[pieces[i].file], pieces[i], *tok, *eot); },
        [&](size_t i, Encoded&& e) {
            if (const int sig = stop_requested(); sig != 0)
                throw Stopped(sig, "during tokenize after " + std::to_string(i) + " of " +
                                       std::to_string(pieces.size()) +
                                       " pieces; no shard was written to " + a.out +
                                       " (the partial shards were removed)");
            sink.append(e.ids.data(), e.ids.size());
            done_bytes += e.bytes;
            documents += e.documents;
            // Progress on stdout (stderr is for the one error line): rewritten in place on a
            // terminal (at most 10 times a second), else one line at most every 5 seconds.
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const bool tty = stdout_is_terminal(), end = i + 1 == pieces.size();
            if (!a.quiet && (s - last_report >= (tty ? 0.1 : 5) || end)) {
                std::printf("%stokenize: %.1f / %.1f MB, %.1f MB/s, %lld tokens%s", tty ? "\r" : "",
                            done_bytes / 1e6, total_bytes / 1e6,
                            done_bytes / 1e6 / std::max(s, 1e-9),
                            static_cast<long long>(sink.total()), tty && !end ? "" : "\n");
                std::fflush(stdout);
                last_report = s;
            }
        });
    MT_CHECK(sink.total() > documents, "empty corpus: the --data files hold no text");
    MT_CHECK(a.val_tokens < sink.total(), "--val-tokens ", a.val_tokens,
             " leaves no training tokens (the corpus has ", sink.total(), ")");
    sink.finish();
    sink.publish();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "tokenize: %zu files, %lld documents, %lld tokens (%d-bit) in %d shards under %s, "
        "%.1f MB/s\n",
        files.size(), static_cast<long long>(documents), static_cast<long long>(sink.total()),
        token_bytes * 8, sink.shards(), a.out.c_str(), done_bytes / 1e6 / std::max(s, 1e-9));
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
    const auto [a, cmd] =
        add_command<TokenizeArgs>(app, "tokenize", "tokenise text / JSONL files into token shards");
    a->tokenizer.add_options(cmd);
    cmd->add_option("--data", a->data, "text or .jsonl files, directories or globs")->required();
    cmd->add_option("--out", a->out, "output directory")->required();
    cmd->add_option("--prefix", a->prefix, "shard name prefix")->capture_default_str();
    add_int_option(cmd, "--shard-tokens", a->shard_tokens, "tokens per shard", int64_t{1},
                   int64_t{INT32_MAX})
        ->capture_default_str();
    add_int_option(cmd, "--val-tokens", a->val_tokens, "the first N tokens go to _val_ shards",
                   int64_t{0})
        ->capture_default_str();
    // An id of 4 bytes at most (the widest shard token), with eot + 1 still an int32.
    add_int_option(cmd, "--eot", a->eot,
                   "end-of-text id between documents (default: the tokenizer's)", int64_t{0},
                   int64_t{INT32_MAX - 1});
    add_int_option(cmd, "--threads", a->threads, "pieces tokenised at once (0 = all cores)", 0)
        ->check(thread_count_check());
    add_int_option(cmd, "--piece-bytes", a->piece_bytes,
                   "bytes of text per parallel piece (cut at line boundaries)", int64_t{1})
        ->capture_default_str();
    cmd->add_flag("--quiet", a->quiet, "no progress line");
    on_run(cmd, exit_code, [a] { run_tokenize(*a); });
}

}  // namespace moetrain::cli
