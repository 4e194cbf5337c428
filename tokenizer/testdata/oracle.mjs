// Test oracle for package tokenizer: Hugging Face's own JS tokenizer and Jinja engine.
// Usage: node oracle.mjs NODE_MODULES MODEL_DIR MODE IN OUT
//   encode: IN is a JSON array of strings; OUT gets [{ids, text, nfc}]: text = decode(ids)
//           without clean_up_tokenization_spaces (Llama 3's config turns it on; drmas never);
//           nfc = the string with every stretch between added tokens put in NFC by JS's
//           String.prototype.normalize (tokenizers normalize those stretches, not the whole).
//   chat:   IN is [{template?, messages, add_generation_prompt}]; OUT gets the rendered strings
//           (template defaults to MODEL_DIR's tokenizer_config.json chat_template; bos_token
//           and enable_thinking=false are passed as transformers would; date_string when the
//           case has one).
//   bench:  IN is a JSON array of strings; prints "BYTES WALL_NS CPU_NS" for one encode pass
//           over them after a warm-up pass (CPU: user + system time of the process).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nm, modelDir, mode, inPath, outPath] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(nm, p)).href);
const input = JSON.parse(fs.readFileSync(inPath, "utf8"));
const config = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));

if (mode === "chat") {
  const { Template } = await load("@huggingface/jinja/dist/index.js");
  const out = input.map((c) =>
    new Template(c.template ?? config.chat_template).render({
      messages: c.messages,
      add_generation_prompt: c.add_generation_prompt,
      enable_thinking: false,
      bos_token: config.bos_token?.content ?? config.bos_token,
      ...(c.date_string === undefined ? {} : { date_string: c.date_string }),
    }),
  );
  fs.writeFileSync(outPath, JSON.stringify(out));
} else {
  const { Tokenizer } = await load("@huggingface/tokenizers/dist/tokenizers.mjs");
  const tj = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
  const tok = new Tokenizer(tj, config);
  const enc = (s) => tok.encode(s, { add_special_tokens: false }).ids;
  if (mode === "encode") {
    const esc = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const added = tj.added_tokens.map((a) => a.content).sort((a, b) => b.length - a.length);
    const splitter = new RegExp("(" + added.map(esc).join("|") + ")");
    const nfc = (s) =>
      s.split(splitter).map((part, i) => (i % 2 === 1 ? part : part.normalize("NFC"))).join("");
    const out = input.map((s) => {
      const ids = enc(s);
      return { ids, text: tok.decode(ids, { clean_up_tokenization_spaces: false }), nfc: nfc(s) };
    });
    fs.writeFileSync(outPath, JSON.stringify(out));
  } else if (mode === "bench") {
    let bytes = 0;
    for (const s of input) enc(s);
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    for (const s of input) {
      enc(s);
      bytes += Buffer.byteLength(s, "utf8");
    }
    const c = process.cpuUsage(c0);
    console.log(`${bytes} ${process.hrtime.bigint() - t0} ${(c.user + c.system) * 1000}`);
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
}
