// A tf2rnn student in the browser: the exported step graph (`tf2rnn export MODEL DIR --format onnx`) in
// onnxruntime-web, BERT's WordPiece tokenizer read from the folder's tokenizer.json, and the streaming
// encoder of tf2rnn_hf/inference/streaming.py: a keystroke re-tokenises only the word being typed and
// steps the tokens that changed; the state at each word boundary is kept, so a delete is a pop.
/* global ort */

// --- BERT's normaliser, pre-tokeniser and WordPiece (the `tokenizers` BertNormalizer / BertPreTokenizer / WordPiece)
const isWhitespace = (c) => c === " " || c === "\t" || c === "\n" || c === "\r" || /\p{Zs}/u.test(c);
const isControl = (c) => !(c === "\t" || c === "\n" || c === "\r") && /\p{C}/u.test(c);
const isPunctuation = (c) => {
  const cp = c.codePointAt(0);
  return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)
    || /\p{P}/u.test(c);
};
const isChinese = (cp) => (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf)
  || (cp >= 0x20000 && cp <= 0x2a6df) || (cp >= 0x2a700 && cp <= 0x2b73f) || (cp >= 0x2b740 && cp <= 0x2b81f)
  || (cp >= 0x2b820 && cp <= 0x2ceaf) || (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);

class WordPiece {
  constructor(tokenizerJson) {
    const model = tokenizerJson.model;
    if (model.type !== "WordPiece") throw new Error(`tokenizer.json holds a ${model.type} model, not WordPiece`);
    this.vocab = new Map(Object.entries(model.vocab));
    this.unk = this.vocab.get(model.unk_token);
    this.prefix = model.continuing_subword_prefix;
    this.maxChars = model.max_input_chars_per_word;
    const norm = tokenizerJson.normalizer || {};
    this.lowercase = norm.lowercase !== false;
    this.stripAccents = norm.strip_accents === null || norm.strip_accents === undefined ? this.lowercase
      : norm.strip_accents;
    this.cleanText = norm.clean_text !== false;
    this.chinese = norm.handle_chinese_chars !== false;
  }

  normalize(text) {
    let out = "";
    for (const c of text) {
      const cp = c.codePointAt(0);
      if (this.cleanText && (cp === 0 || cp === 0xfffd || isControl(c))) continue;
      if (this.cleanText && isWhitespace(c)) { out += " "; continue; }
      out += this.chinese && isChinese(cp) ? ` ${c} ` : c;
    }
    if (this.lowercase) out = out.toLowerCase();
    if (this.stripAccents) out = out.normalize("NFD").replace(/\p{Mn}/gu, "");
    return out;
  }

  // Token ids of `text`, without special tokens (what the Python stream asks of its tokenizer per word).
  encode(text) {
    const words = [];
    let word = "";
    for (const c of this.normalize(text)) {
      if (isWhitespace(c)) { if (word) words.push(word); word = ""; }
      else if (isPunctuation(c)) { if (word) words.push(word); words.push(c); word = ""; }
      else word += c;
    }
    if (word) words.push(word);
    const ids = [];
    for (const w of words) {
      const chars = [...w];
      if (chars.length > this.maxChars) { ids.push(this.unk); continue; }
      const pieces = [];
      let start = 0;
      while (start < chars.length) {
        let end = chars.length, found = null;
        while (start < end) {
          const piece = (start > 0 ? this.prefix : "") + chars.slice(start, end).join("");
          if (this.vocab.has(piece)) { found = this.vocab.get(piece); break; }
          end -= 1;
        }
        if (found === null) { pieces.length = 0; pieces.push(this.unk); break; }
        pieces.push(found);
        start = end;
      }
      ids.push(...pieces);
    }
    return ids;
  }
}

// --- The student's step graph
class Student {
  static async load(folder, { int8 = false } = {}) {
    const manifest = await (await fetch(`${folder}/tf2rnn_onnx.json`)).json();
    const tokenizer = new WordPiece(await (await fetch(`${folder}/tokenizer.json`)).json());
    const step = manifest.graphs.step;
    const file = int8 ? step.int8_file : step.file;
    if (!file) throw new Error("this folder holds no int8 graph: export with --int8");
    const session = await ort.InferenceSession.create(`${folder}/${file}`, { executionProviders: ["wasm"] });
    return new Student(manifest, tokenizer, session);
  }

  constructor(manifest, tokenizer, session) {
    this.manifest = manifest;
    this.tokenizer = tokenizer;
    this.session = session;
    this.step_ = manifest.graphs.step;
  }

  initState() {
    const state = {};
    for (const s of this.manifest.state) {
      const dims = [1, ...s.shape.slice(1)];
      const size = dims.reduce((a, b) => a * b, 1);
      state[s.name] = s.dtype === "int64" ? new ort.Tensor("int64", new BigInt64Array(size), dims)
        : new ort.Tensor("float32", new Float32Array(size), dims);
    }
    return state;
  }

  async step(tokenId, state) {
    const feeds = { input_ids: new ort.Tensor("int64", BigInt64Array.from([BigInt(tokenId)]), [1]) };
    for (const s of this.manifest.state) feeds[`state_in.${s.name}`] = state[s.name];
    const out = await this.session.run(feeds);
    const next = {};
    for (const s of this.manifest.state) {
      next[s.name] = s.name === "last_embedding" ? out[this.step_["state_out.last_embedding"]] : out[`state_out.${s.name}`];
    }
    return next;
  }
}

// --- The stream (StreamingEncoder for one text, no max_checkpoints)
class Stream {
  constructor(student) {
    this.student = student;
    this.text = "";
    this.boundaries = []; // {start, state, wordTokens, wordStates}
    this.wordTokens = [];
    this.wordStates = [];
    this.empty = student.initState();
  }

  get state() {
    if (this.wordStates.length) return this.wordStates[this.wordStates.length - 1];
    return this.boundaries.length ? this.boundaries[this.boundaries.length - 1].state : this.empty;
  }

  get embedding() { return this.state.last_embedding.data; }

  async refresh() {
    const start = this.boundaries.length ? this.boundaries[this.boundaries.length - 1].start : 0;
    const tokens = this.student.tokenizer.encode(this.text.slice(start));
    let keep = 0;
    while (keep < Math.min(tokens.length, this.wordTokens.length) && tokens[keep] === this.wordTokens[keep]) keep += 1;
    this.wordTokens = this.wordTokens.slice(0, keep);
    this.wordStates = this.wordStates.slice(0, keep);
    for (const token of tokens.slice(keep)) {
      const next = await this.student.step(token, this.state);
      this.wordTokens.push(token);
      this.wordStates.push(next);
    }
  }

  async type(text) {
    let dirty = false;
    for (const c of text) {
      if (isWhitespace(c)) {
        if (dirty) { await this.refresh(); dirty = false; }
        this.boundaries.push({ start: this.text.length + 1, state: this.state, wordTokens: this.wordTokens,
          wordStates: this.wordStates });
        this.wordTokens = [];
        this.wordStates = [];
      } else dirty = true;
      this.text += c;
    }
    await this.refresh();
    return this.embedding;
  }

  async delete(n) {
    this.text = this.text.slice(0, this.text.length - n);
    while (this.boundaries.length && this.boundaries[this.boundaries.length - 1].start > this.text.length) {
      const popped = this.boundaries.pop(); // a pop, never a re-encode
      this.wordTokens = popped.wordTokens;
      this.wordStates = popped.wordStates;
    }
    await this.refresh();
    return this.embedding;
  }
}

// Characters are counted as the Python stream counts them (code points), so a diff of two texts is the
// keystrokes between them.
async function applyText(stream, text) {
  const old = [...stream.text], now = [...text];
  let common = 0;
  while (common < Math.min(old.length, now.length) && old[common] === now[common]) common += 1;
  if (old.length > common) await stream.delete(old.slice(common).join("").length);
  if (now.length > common) await stream.type(now.slice(common).join(""));
  return old.length - common + now.length - common;
}

// The teacher's forward on the whole of `text` ([CLS] text [SEP]), timed by the page beside the student's
// update; returns the number of tokens it read. (Its pooling is left out, as in benchmarks/run.py.)
async function encodePrefix(session, tokenizer, text) {
  const ids = [tokenizer.vocab.get("[CLS]"), ...tokenizer.encode(text), tokenizer.vocab.get("[SEP]")];
  const n = ids.length;
  const tensor = (values) => new ort.Tensor("int64", BigInt64Array.from(values.map(BigInt)), [1, n]);
  await session.run({ input_ids: tensor(ids), attention_mask: tensor(ids.map(() => 1)),
    token_type_ids: tensor(ids.map(() => 0)) });
  return n;
}

window.tf2rnn = { WordPiece, Student, Stream, applyText, encodePrefix };
