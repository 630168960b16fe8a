"""A plain PyTorch RoFormer: the PyTorch side of the Go/PyTorch speed comparison.

It computes what Hugging Face transformers' RoFormerModel and RoFormerForMaskedLM
compute (models/roformer/modeling_roformer.py, v4.30.2), written from the math
in shared/fixtures/hf-roformer/README.md ("The math HF uses") rather than from
HF's code, and without transformers (not installable here). check_fixtures.py
shows that it reproduces HF's outputs on every shared fixture case.

    x  = LayerNorm_E(word[ids] + token_type[types])         no absolute positions
    x  = embeddings_project(x)                              only when E != H
    per layer (post-LN), d = H / heads:
        q, k, v = Linear(x); q, k (and v if rotary_value) rotated by RoPE,
                  adjacent pairs (2i, 2i+1), theta_i = 10000^(-2i/d)
        a = LayerNorm(x + Linear(softmax(q k^T / sqrt(d) + (1 - mask) * float32_min) v))
        x = LayerNorm(a + Linear(act(Linear(a))))
    MLM head: Linear(H->E) -> act -> LayerNorm(E) -> x W_word^T + bias (tied decoder)

Module and parameter names follow HF's state-dict keys, so a checkpoint loads
with load_state_dict.
"""

import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

F32_MIN = torch.finfo(torch.float32).min  # HF's additive mask value, -3.4028234663852886e38

# RoFormerConfig's defaults (configuration_roformer.py).
DEFAULTS = dict(
    vocab_size=50000, embedding_size=None, hidden_size=768, num_hidden_layers=12,
    num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
    hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=1536,
    type_vocab_size=2, initializer_range=0.02, layer_norm_eps=1e-12, rotary_value=False,
    pad_token_id=0,
)

# The presets of `roformer bench --size` (roformer.Preset in model/roformer/presets.go with the
# vocabulary sizes of cmd/roformer/cmd_bench.go): layers, hidden, heads, I, vocab.
SIZES = {
    "tiny": (4, 256, 4, 1024, 8000),
    "small": (6, 384, 6, 1536, 12000),
    "base": (12, 768, 12, 3072, 12000),
}


class Config:
    """The fields of config.json that the forward pass uses, over RoFormerConfig's defaults."""

    def __init__(self, **kw):
        d = dict(DEFAULTS)
        d.update({k: v for k, v in kw.items() if k in DEFAULTS})
        if d["embedding_size"] is None:
            d["embedding_size"] = d["hidden_size"]
        self.__dict__.update(d)
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_attention_heads {self.num_attention_heads}")
        self.head_size = self.hidden_size // self.num_attention_heads
        if self.head_size % 2:
            raise ValueError(f"head size {self.head_size} must be even for the rotary pairs")

    @classmethod
    def load(cls, path):
        with open(path) as f:
            return cls(**json.load(f))

    @classmethod
    def preset(cls, size):
        layers, hidden, heads, inter, vocab = SIZES[size]
        return cls(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                   intermediate_size=inter, vocab_size=vocab, max_position_embeddings=512, hidden_act="gelu")


def activation(name):
    """hidden_act as a function: gelu is the exact erf form, gelu_new the tanh form."""
    acts = {
        "gelu": F.gelu,
        "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
        "relu": F.relu,
        "silu": F.silu,
        "swish": F.silu,
        "tanh": torch.tanh,
    }
    if name not in acts:
        raise ValueError(f"hidden_act {name!r} is not one of {sorted(acts)}")
    return acts[name]


def sinusoid_table(n_pos, d):
    """HF's RoFormerSinusoidalPositionalEmbedding table [n_pos, d]: all sines, then all cosines.

    The angle p / 10000^(2i/d) is computed in float64 (Python floats) and the
    sin/cos rounded to float32, which matches HF's numpy table bit for bit.
    """
    half = d // 2
    inv = [math.pow(10000.0, 2.0 * i / d) for i in range(half)]
    rows = []
    for p in range(n_pos):
        ang = [p / v for v in inv]
        rows.append([math.sin(a) for a in ang] + [math.cos(a) for a in ang])
    return torch.tensor(rows, dtype=torch.float64).to(torch.float32)


class Rotary:
    """Cached sin/cos tables, repeated element-wise to the head size: [s0, s0, s1, s1, ...]."""

    def __init__(self, head_size):
        self.d = head_size
        self.n = 0
        self.sin = self.cos = None

    def tables(self, T):
        if T > self.n:
            n = max(T, 2 * self.n)
            w = sinusoid_table(n, self.d)
            self.sin = w[:, : self.d // 2].repeat_interleave(2, dim=-1)
            self.cos = w[:, self.d // 2:].repeat_interleave(2, dim=-1)
            self.n = n
        return self.sin[:T], self.cos[:T]

    @staticmethod
    def apply(x, sin, cos):
        """x [B, heads, T, d] -> x * cos + rot(x) * sin with rot(x) = [-x1, x0, -x3, x2, ...]."""
        rot = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).reshape(x.shape)
        return x * cos + rot * sin


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c.hidden_size
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.heads, self.d, self.rotary_value = c.num_attention_heads, c.head_size, c.rotary_value
        self.dropout = nn.Dropout(c.attention_probs_dropout_prob)

    def forward(self, x, mask_add, sin, cos):
        B, T, H = x.shape

        def split(t):  # [B, T, H] -> [B, heads, T, d]
            return t.view(B, T, self.heads, self.d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        q, k = Rotary.apply(q, sin, cos), Rotary.apply(k, sin, cos)
        if self.rotary_value:
            v = Rotary.apply(v, sin, cos)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + mask_add
        probs = self.dropout(torch.softmax(scores, dim=-1))
        return torch.matmul(probs, v).transpose(1, 2).reshape(B, T, H)


class DenseLN(nn.Module):
    """dense -> dropout -> LayerNorm(. + residual): BERT's SelfOutput and Output blocks."""

    def __init__(self, n_in, n_out, c):
        super().__init__()
        self.dense = nn.Linear(n_in, n_out)
        self.LayerNorm = nn.LayerNorm(n_out, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = SelfAttention(c)  # HF's key: attention.self.*
        self.output = DenseLN(c.hidden_size, c.hidden_size, c)

    def forward(self, x, mask_add, sin, cos):
        return self.output(self.self(x, mask_add, sin, cos), x)


class Intermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.act = activation(c.hidden_act)

    def forward(self, x):
        return self.act(self.dense(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = DenseLN(c.intermediate_size, c.hidden_size, c)

    def forward(self, x, mask_add, sin, cos):
        a = self.attention(x, mask_add, sin, cos)
        return self.output(self.intermediate(a), a)


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.embedding_size, padding_idx=c.pad_token_id)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.embedding_size)
        self.LayerNorm = nn.LayerNorm(c.embedding_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, ids, types):
        return self.dropout(self.LayerNorm(self.word_embeddings(ids) + self.token_type_embeddings(types)))


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList(Layer(c) for _ in range(c.num_hidden_layers))


class RoFormerModel(nn.Module):
    """The encoder (HF's RoFormerModel, stored under `roformer.`). Returns the last hidden state [B, T, H]."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        self.embeddings = Embeddings(c)
        if c.embedding_size != c.hidden_size:
            self.embeddings_project = nn.Linear(c.embedding_size, c.hidden_size)
        self.encoder = Encoder(c)
        self.rotary = Rotary(c.head_size)

    def forward(self, ids, attention_mask=None, token_type_ids=None, hidden_states=None):
        B, T = ids.shape
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        # [B, 1, 1, T]: 0 for visible keys, float32_min for masked ones (HF's get_extended_attention_mask).
        mask_add = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * F32_MIN
        x = self.embeddings(ids, token_type_ids)
        if hasattr(self, "embeddings_project"):
            x = self.embeddings_project(x)
        sin, cos = self.rotary.tables(T)
        if hidden_states is not None:
            hidden_states.append(x)
        for layer in self.encoder.layer:
            x = layer(x, mask_add, sin, cos)
            if hidden_states is not None:
                hidden_states.append(x)
        return x


class Transform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.embedding_size)
        self.LayerNorm = nn.LayerNorm(c.embedding_size, eps=c.layer_norm_eps)
        self.act = activation(c.hidden_act)

    def forward(self, x):
        return self.LayerNorm(self.act(self.dense(x)))


class Predictions(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = Transform(c)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))


class LMHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = Predictions(c)


class RoFormerForMaskedLM(nn.Module):
    """The encoder with the MLM head; the decoder weight is the word embedding table (tied)."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        self.roformer = RoFormerModel(c)
        self.cls = LMHead(c)

    def head(self, x):
        """MLM logits of hidden states x [..., H] -> [..., V]."""
        p = self.cls.predictions
        return F.linear(p.transform(x), self.roformer.embeddings.word_embeddings.weight, p.bias)

    def forward(self, ids, attention_mask=None, token_type_ids=None, labels=None, hidden_states=None):
        """Returns (last hidden state [B, T, H], logits [B, T, V], mean CE over labels != -100 or None)."""
        x = self.roformer(ids, attention_mask, token_type_ids, hidden_states)
        logits = self.head(x)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        return x, logits, loss

    def init_weights(self, seed):
        """HF's _init_weights: Linear/Embedding weights N(0, initializer_range^2), biases 0,
        LayerNorm weight 1 and bias 0, the padding row of the word embedding 0."""
        g = torch.Generator().manual_seed(seed)
        std = self.config.initializer_range
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "LayerNorm" in name and name.endswith("weight"):
                    p.fill_(1.0)
                elif name.endswith("bias"):
                    p.zero_()
                else:
                    p.normal_(0.0, std, generator=g)
            pad = self.config.pad_token_id
            if pad is not None:
                self.roformer.embeddings.word_embeddings.weight[pad].zero_()


# ---- checkpoints -------------------------------------------------------------

SAFETENSORS_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def read_safetensors(path):
    """Reads a .safetensors file: u64 little-endian header length N, N bytes of JSON
    {name: {dtype, shape, data_offsets: [begin, end]}} (offsets from the end of the header), the data."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file ({len(raw)} bytes)")
    header = json.loads(raw[8:8 + n])
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = SAFETENSORS_DTYPES.get(e["dtype"])
        if dt is None:
            raise ValueError(f"{path}: tensor {name}: dtype {e['dtype']} is not supported")
        b, end = e["data_offsets"]
        numel = math.prod(e["shape"])
        if end > len(data) or end - b != numel * torch.tensor([], dtype=dt).element_size():
            raise ValueError(f"{path}: tensor {name}: offsets {b}..{end} do not fit shape {e['shape']} {e['dtype']}")
        t = torch.frombuffer(bytearray(data[b:end]), dtype=dt) if numel else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"]).to(torch.float32)
    return out


def read_weights(path):
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    return {k: v.to(torch.float32) for k, v in torch.load(path, map_location="cpu", weights_only=True).items()}


# Keys of an HF RoFormerForMaskedLM checkpoint that are not parameters here.
TIED = {"cls.predictions.decoder.weight": "roformer.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias"}
POSITIONS = "roformer.encoder.embed_positions.weight"


def load_mlm(model_dir, weights=None):
    """Builds RoFormerForMaskedLM from an HF folder (config.json + model.safetensors or
    pytorch_model.bin). Returns (model, notes). The tied decoder keys must equal what
    they are tied to; a stored sinusoid table must equal the one built here; keys of
    other heads (classifier.*, qa_outputs.*) are ignored."""
    c = Config.load(os.path.join(model_dir, "config.json"))
    m = RoFormerForMaskedLM(c)
    if weights is None:
        st = os.path.join(model_dir, "model.safetensors")
        weights = st if os.path.exists(st) else os.path.join(model_dir, "pytorch_model.bin")
    sd = read_weights(weights)
    notes = []
    for k, target in TIED.items():
        if k in sd:
            if not torch.equal(sd[k], sd[target]):
                raise ValueError(f"{weights}: {k} differs from {target}, to which it is tied")
            del sd[k]
            notes.append(f"{k} tied")
    if POSITIONS in sd:
        table = sd.pop(POSITIONS)
        mine = sinusoid_table(table.shape[0], c.head_size)
        if not torch.equal(table, mine):
            raise ValueError(f"{weights}: {POSITIONS} differs from the rebuilt table by {(table - mine).abs().max().item()}")
        notes.append("sinusoid table equal bit for bit")
    for k in [k for k in sd if not k.startswith(("roformer.", "cls.predictions."))]:
        del sd[k]
    missing, unexpected = m.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise ValueError(f"{weights}: missing {missing}, unexpected {unexpected}")
    return m, notes


# ---- the benchmark's FLOP count ------------------------------------------------

def model_flops(c, head, B, T, head_rows):
    """Matrix-product FLOPs (2*M*N*K) of one forward pass; the same count as modelFLOPs in
    cmd/roformer/cmd_bench.go: projection, q/k/v/output, feed-forward, q k^T and probs v,
    and the LM head on head_rows rows. A training step is 3x this."""
    E, H, I, V = c.embedding_size, c.hidden_size, c.intermediate_size, c.vocab_size
    bt = B * T
    f = 2.0 * bt * E * H if E != H else 0.0
    f += c.num_hidden_layers * (4 * 2.0 * bt * H * H + 2 * 2.0 * bt * H * I + 2 * 2.0 * B * T * T * H)
    if head == "masked-lm":
        f += 2.0 * head_rows * H * E + 2.0 * head_rows * E * V
    return f
