# %% [markdown]
# # moetrain from Python
# A notebook-style walk through the `moetrain` package (cells separated by `# %%`, so it runs
# as a plain script or cell by cell in VS Code / Jupyter): open a device, build a small MoE,
# train it on a text file with a Python loop, watch the expert load, evaluate, generate,
# save a checkpoint that `moetrain train --resume` and `moetrain generate` accept.
#
#     python examples/python_quickstart.py [corpus.txt] [steps]
#
# (after `pip install .`, or with PYTHONPATH=build/python in a -DMOETRAIN_PYTHON=ON build)

# %%
import os
import sys
import tempfile

import numpy as np

import moetrain

here = os.path.dirname(os.path.abspath(__file__))
corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    here, "..", "..", "shared", "data", "tinyshakespeare.txt")
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
if not os.path.exists(corpus):  # any text works; fall back to this very file
    corpus = os.path.abspath(__file__)

# %% Backends and devices: what is usable here, and why the rest is not.
for b in moetrain.list_backends():
    usable = [d["id"] for d in b["devices"] if d["available"]]
    print(f"{b['name']:7s} {'usable: ' + ', '.join(usable) if usable else 'unavailable: ' + b['reason']}")
dev = moetrain.open_device("cpu")
print("using", dev)

# %% A model from a config dict: the tiny preset with a longer context.
config = moetrain.preset_config("tiny")
config["max_seq_len"] = 256
model = moetrain.Model.from_config(dev, config)
model.init_weights(1337)
print(f"{model.num_params / 1e6:.2f}M parameters, MoE layers from {config['moe']['first_layer']}")

# %% Data: the same 90/10 split and batch windows as `moetrain train`.
B, T, ACCUM = 8, 64, 2
train, val = moetrain.split_tokens(moetrain.load_tokens(corpus))
loader = moetrain.BatchLoader(train, B, T)
trainer = moetrain.Trainer(model, lr=3e-3, warmup=10, total_steps=steps, accum=ACCUM)

# %% The training loop: x and y are int32 arrays [accum * B, T]; step() returns a dataclass.
for i in range(steps):
    batches = [loader.next() for _ in range(ACCUM)]
    x = np.concatenate([b[0] for b in batches])
    y = np.concatenate([b[1] for b in batches])
    s = trainer.step(x, y)
    if s.step % 10 == 0 or s.step == 1:
        load = " ".join(f"L{e.layer} {e.min_share:.2f}/{e.max_share:.2f}" for e in s.expert_load)
        print(f"step {s.step:4d} loss {s.loss:.4f} ce {s.ce:.4f} lr {s.lr:.2e} "
              f"gnorm {s.grad_norm:.2f} | expert load min/max {load}")

# %% Evaluation on the validation split, and the parameters as NumPy arrays.
ev = moetrain.evaluate(model, val, B, T, batches=4)
print(f"val loss {ev.loss:.4f} (ce {ev.ce:.4f})")
emb = model.get_param("tok_emb.weight")
print("token embedding", emb.shape, emb.dtype, f"norm {np.linalg.norm(emb):.2f}")

# %% Generation from text, with the sampling options of `moetrain generate`.
print(repr(moetrain.generate_text(model, "ROMEO:", max_new_tokens=80, temperature=0.8, top_k=40)))

# %% Checkpoints: the CLI can resume and sample from this directory.
out = tempfile.mkdtemp(prefix="moetrain-py-")
moetrain.save_checkpoint(os.path.join(out, "step_%06d" % s.step),
                         model, trainer, seed=1337, batch=B, seq=T, train_pos=loader.position,
                         data_path=corpus)
print("saved", out, "->", moetrain.read_checkpoint_info(out)["dir"])

# %% Library errors raise moetrain.Error with the CLI's one-line message.
try:
    moetrain.open_device("cuda:3")
except moetrain.Error as e:
    print("moetrain.Error:", e)
