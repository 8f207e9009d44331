// write_checkpoint_dir: every file is written into `<dir>.tmp-<pid>` and fsynced, then the
// directory is renamed into place (io_atomic_dir.h); stale temporaries of dead processes
// next to it are removed first. Every tensor and every file is checksummed
// (checkpoint_integrity.h).
#include "io/checkpoint_write.h"

#include "io/atomic_dir.h"
#include "io/checkpoint_integrity.h"
#include "io/checkpoint_meta.h"
#include "io/checkpoint_tensors.h"
#include "io/file.h"
#include "moetrain/error.h"
#include "moetrain/safetensors.h"

namespace moetrain::io {

void write_checkpoint_dir(const std::string& dir, const CheckpointBuffers& b,
                          const TrainState& state, OptimizerState opt) {
    MT_CHECK(b.params && b.weights, "checkpoint ", dir, ": no parameters to write");
    AtomicDirWriter out(dir);
    remove_stale_tmp_dirs(out.parent_dir());
    std::map<std::string, uint32_t> crcs;  // file -> CRC32C, recorded in state.json
    {
        SafetensorsWriter w;
        add_flat_tensors(w, *b.params, *b.weights, "");
        if (b.buffers) add_flat_tensors(w, *b.buffers, *b.buffer_values, "");
        w.set_metadata("format", kCheckpointFormat);
        w.set_metadata("config", b.config_json);
        w.add_checksums();
        crcs[kModelFile] = w.write(out.file(kModelFile));
    }
    if (opt == OptimizerState::adamw) {
        MT_CHECK(b.m && b.v, "checkpoint ", dir, ": AdamW state without moment buffers");
        SafetensorsWriter w;
        add_flat_tensors(w, *b.params, *b.m, "m.");
        add_flat_tensors(w, *b.params, *b.v, "v.");
        w.set_metadata("format", kCheckpointFormat);
        w.add_checksums();
        crcs[kOptimizerFile] = w.write(out.file(kOptimizerFile));
    }
    if (opt == OptimizerState::adamw8bit) {
        MT_CHECK(b.quantized, "checkpoint ", dir, ": 8-bit AdamW state without its buffers");
        SafetensorsWriter w;
        add_quantized_tensors(w, *b.quantized);
        w.set_metadata("format", kCheckpointFormat);
        w.set_metadata("optimizer", optimizer_name(OptimizerKind::adamw8bit));
        w.set_metadata("block_size", std::to_string(kAdamW8bitBlock));
        w.set_metadata("layout", flat_layout(*b.params));
        w.add_checksums();
        crcs[kOptimizerFile] = w.write(out.file(kOptimizerFile));
    }
    if (!state.tokenizer_file.empty())  // the tokenizer travels with the model
        write_file_synced(out.file(tokenizer_copy_name(state.tokenizer)), state.tokenizer_file);
    write_file_synced(out.file(kStateFile), add_state_checksums(state_to_json(state, opt), crcs));
    out.commit();
}

}  // namespace moetrain::io
