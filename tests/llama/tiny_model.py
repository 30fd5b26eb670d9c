"""Writes a tiny GGUF model for llama.cpp's server: a byte-level BPE vocabulary, a Hermes-style chat
template with tools, and weights chosen (not trained) so that greedy decoding is deterministic.

The model is a bigram table: one transformer block whose attention and feed-forward outputs are zero,
one-hot token embeddings, and an output matrix holding, for each token, a ranking of the next token. The
chat template decides what the model does by the marker it puts after the assistant header:

- `<|call|>` (the last message is the user's): the model opens `<tool_call>`; llama.cpp's grammar then
  forces a call of an offered tool, whose string arguments come out as "P";
- `<|answer|>` (the last message is a tool result): the model answers "OK" and ends its turn;
- `<|ramble|>` (the user's message contains "ramble"): the model writes "a" until the token limit;
- `<|json|>` (the user's message contains "json"): the model opens `{`, then follows the generic ranking:
  unconstrained that is no JSON at all, but under a JSON-schema grammar (ambit's `text_tool_calls =
  "constrained"`) it is a valid call of an offered tool, written as text.

Usage: python tiny_model.py OUT.gguf
"""

from __future__ import annotations

import sys

import numpy as np
from gguf import GGUFWriter, TokenType

CHAT_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}
{% endif %}# Tools
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
Call a function as <tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- if message.tool_calls %}{% for tc in message.tool_calls %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>{% endfor %}{% endif %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if messages[-1].role == 'tool' %}<|answer|>{% elif 'ramble' in messages[-1].content %}<|ramble|>{% elif 'json' in messages[-1].content %}<|json|>{% else %}<|call|>{% endif %}
{%- endif %}"""

CONTROL = ["<|im_start|>", "<|im_end|>"]
# Text tokens: the markers are text too, so that llama.cpp's grammar can read them in the prompt.
TEXT_SPECIAL = ["<|call|>", "<|answer|>", "<|ramble|>", "<|json|>", "<tool_call>", "</tool_call>", "<tool_response>",
                "</tool_response>"]


def byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode table: the printable form of each byte in a byte-level BPE vocabulary."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    table = dict(zip(printable, codes))
    return [chr(table[b]) for b in range(256)]


def main(out: str) -> None:
    symbols = byte_symbols()
    space = symbols[ord(" ")]
    # llama.cpp wants at least one merge: two spaces make one token.
    tokens = symbols + [space + space] + CONTROL + TEXT_SPECIAL
    types = [TokenType.NORMAL] * 257 + [TokenType.CONTROL] * len(CONTROL)
    types += [TokenType.USER_DEFINED] * len(TEXT_SPECIAL)
    ids = {t: i for i, t in enumerate(tokens)}

    def tid(text: str) -> int:
        if text in ids:
            return ids[text]
        return ids[symbols[ord(text)]]

    n_vocab = len(tokens)
    n_embd = (n_vocab + 63) // 64 * 64

    # The next-token ranking, best first. Every token not named ranks below, in id order.
    generic = ["P", '"', "}", "</tool_call>", "<|im_end|>", "{", ":", ",", "\n", " "]
    rows = {
        "<|call|>": ["<tool_call>"],
        "<tool_call>": ["\n"],
        "<|answer|>": ["O"],
        "O": ["K"],
        "K": ["<|im_end|>"],
        "P": ['"'],
        "<|ramble|>": ["a"],
        "<|json|>": ["{"],
        "a": ["a"],
    }
    base = np.linspace(0.0, -1.0, n_vocab, dtype=np.float32)  # ties broken by id
    table = np.tile(base, (n_vocab, 1))  # table[current, next]
    for i in range(n_vocab):
        order = rows.get(tokens[i] if i >= 257 else chr(i) if i < 128 else "", None)
        ranked = (order or []) + generic
        for rank, t in enumerate(ranked):
            j = tid(t)
            table[i, j] = max(table[i, j], 100.0 - rank)

    scale = np.float32(1.0 / np.sqrt(n_embd))  # RMS norm scales a one-hot row by sqrt(n_embd)
    embd = np.zeros((n_vocab, n_embd), dtype=np.float32)
    embd[np.arange(n_vocab), np.arange(n_vocab)] = 1.0
    output = np.zeros((n_vocab, n_embd), dtype=np.float32)
    output[:, :n_vocab] = table.T * scale
    n_ff = 64

    w = GGUFWriter(out, "llama")
    w.add_name("ambit-tiny-bigram")
    w.add_context_length(8192)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_dimension_count(n_embd // 4)
    w.add_file_type(0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{space} {space}"])
    w.add_bos_token_id(ids["<|im_start|>"])
    w.add_eos_token_id(ids["<|im_end|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    zeros = lambda *s: np.zeros(s, dtype=np.float32)  # noqa: E731
    ones = lambda *s: np.ones(s, dtype=np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", ones(n_embd))
    w.add_tensor("output.weight", output)
    w.add_tensor("blk.0.attn_norm.weight", ones(n_embd))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(f"blk.0.{name}.weight", zeros(n_embd, n_embd))
    w.add_tensor("blk.0.ffn_norm.weight", ones(n_embd))
    w.add_tensor("blk.0.ffn_gate.weight", zeros(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_up.weight", zeros(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_down.weight", zeros(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1])
