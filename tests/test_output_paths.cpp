// Output paths (io/out_path.h), exclusive temporary files (io/file.h) and output manifests
// (io/out_manifest.h): `..` of a missing directory is never trusted, links are followed to
// the file a write would touch, a planted link at a temporary name is never followed, and a
// directory is replaced only when its manifest lists every entry unchanged.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/file.h"
#include "io/out_manifest.h"
#include "io/out_path.h"
#include "moetrain/error.h"
#include "test_checkpoint_util.h"

namespace fs = std::filesystem;
using namespace moetrain;
using namespace moetrain::testing;

namespace {

void put(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

std::string real(const std::string& p) {
    return fs::canonical(p).string();
}

}  // namespace

TEST_CASE("outputs: resolve_path takes .. against the real parent and follows links") {
    TempDir tmp;
    const std::string root = real(tmp.path.string());
    fs::create_directories(tmp.file("existing/sub"));
    fs::create_directories(tmp.file("elsewhere"));
    // `MISSING/..` is the directory MISSING would be made in, not a path that fails.
    CHECK(io::resolve_path(tmp.file("missing/../existing")) == root + "/existing");
    CHECK(io::resolve_path(tmp.file("a/b/../../existing/./sub/")) == root + "/existing/sub");
    CHECK(io::resolve_path(tmp.file("missing/new.txt")) == root + "/missing/new.txt");
    // `..` of a link is the parent of its target, as the kernel takes it.
    fs::create_directory_symlink(tmp.file("existing/sub"), tmp.file("link"));
    CHECK(io::resolve_path(tmp.file("link/../x")) == root + "/existing/x");
    // A relative link, and a dangling one: its target is what a write would create.
    fs::create_symlink("elsewhere/new.txt", tmp.file("dangling"));
    CHECK(io::resolve_path(tmp.file("dangling")) == root + "/elsewhere/new.txt");
    // Relative paths are taken against the working directory.
    const fs::path cwd = fs::current_path();
    fs::current_path(tmp.path);
    CHECK(io::resolve_path("missing/../existing") == root + "/existing");
    fs::current_path(cwd);
    // A loop of links and an empty path are one-line errors.
    fs::create_symlink(tmp.file("loop_b"), tmp.file("loop_a"));
    fs::create_symlink(tmp.file("loop_a"), tmp.file("loop_b"));
    CHECK_THROWS_WITH_AS(io::resolve_path(tmp.file("loop_a"), "--out"),
                         doctest::Contains("symbolic links"), Error);
    CHECK_THROWS_AS(io::resolve_path("", "--out"), Error);
}

TEST_CASE("outputs: path_within compares whole components") {
    CHECK(io::path_within("/a/b", "/a/b"));
    CHECK(io::path_within("/a/b/c", "/a/b"));
    CHECK_FALSE(io::path_within("/a/bc", "/a/b"));
    CHECK_FALSE(io::path_within("/a", "/a/b"));
    CHECK(io::path_within("/x", "/"));
}

TEST_CASE("outputs: temporary files are created exclusively and never follow a link") {
    TempDir tmp;
    const std::string victim = tmp.file("victim.txt"), out = tmp.file("report.html");
    put(victim, "precious");
    fs::create_symlink(victim, io::temp_file_name(out));  // planted where the temporary goes
    CHECK_THROWS_WITH_AS(io::write_file_atomic(out, "<html>", "--out"),
                         doctest::Contains("cannot write"), Error);
    CHECK(slurp(victim) == "precious");
    CHECK(fs::is_symlink(io::temp_file_name(out)));  // not ours: left as it was
    CHECK(!fs::exists(out));
    fs::remove(io::temp_file_name(out));
    io::write_file_atomic(out, "<html>", "--out");
    CHECK(slurp(out) == "<html>");
    CHECK(!fs::exists(io::temp_file_name(out)));
    // SyncedFile in exclusive mode refuses an existing file too.
    put(tmp.file("exists.tmp"), "x");
    CHECK_THROWS_AS(io::SyncedFile(tmp.file("exists.tmp"), io::Create::exclusive), Error);
    CHECK(slurp(tmp.file("exists.tmp")) == "x");
}

TEST_CASE("outputs: a directory is replaced only when its manifest lists each entry unchanged") {
    TempDir tmp;
    const std::string dir = tmp.file("out");
    CHECK(io::read_earlier_output(dir, "export", "--out").files.empty());  // missing: fine
    fs::create_directories(dir);
    CHECK(!io::read_earlier_output(dir, "export", "--out").has_manifest);  // empty: fine
    put(dir + "/a.bin", "aaaa");
    put(dir + "/b.json", "{}");
    // Files without a manifest are foreign.
    CHECK_THROWS_WITH_AS(io::read_earlier_output(dir, "export", "--out"),
                         doctest::Contains("a.bin"), Error);
    io::write_output_manifest(dir, "export", {{"k", 1}},
                              {io::manifest_entry(dir, "a.bin"), io::manifest_entry(dir, "b.json")},
                              true);
    io::EarlierOutput e = io::read_earlier_output(dir, "export", "--out");
    CHECK(e.files == std::vector<std::string>{"a.bin", "b.json"});
    CHECK(e.complete);
    CHECK(e.settings == io::ordered_json({{"k", 1}}));
    // Another writer's output is not ours.
    CHECK_THROWS_WITH_AS(io::read_earlier_output(dir, "tokenize", "--out"),
                         doctest::Contains("export"), Error);
    // A file the manifest does not list, a changed file, a directory: refused, named.
    put(dir + "/model-original-fp32.safetensors", "user");
    CHECK_THROWS_WITH_AS(io::read_earlier_output(dir, "export", "--out"),
                         doctest::Contains("model-original-fp32.safetensors"), Error);
    fs::remove(dir + "/model-original-fp32.safetensors");
    put(dir + "/b.json", "{\"x\":1}");
    CHECK_THROWS_WITH_AS(io::read_earlier_output(dir, "export", "--out"),
                         doctest::Contains("changed"), Error);
    put(dir + "/b.json", "{}");
    fs::create_directories(dir + "/model_backup.safetensors");
    CHECK_THROWS_WITH_AS(io::read_earlier_output(dir, "export", "--out"),
                         doctest::Contains("model_backup.safetensors"), Error);
    fs::remove(dir + "/model_backup.safetensors");
    // A listed name that is now a link is not the file that was written.
    fs::remove(dir + "/a.bin");
    put(tmp.file("elsewhere.bin"), "aaaa");
    fs::create_symlink(tmp.file("elsewhere.bin"), dir + "/a.bin");
    CHECK_THROWS_AS(io::read_earlier_output(dir, "export", "--out"), Error);
    fs::remove(dir + "/a.bin");
    // Removing deletes exactly what the manifest lists, then the manifest.
    e = io::read_earlier_output(dir, "export", "--out");
    CHECK(e.files == std::vector<std::string>{"b.json"});
    io::remove_earlier_output(dir, e);
    CHECK(fs::is_empty(dir));
    CHECK(slurp(tmp.file("elsewhere.bin")) == "aaaa");
}
