// Test oracle for package gateway: a model folder's chat template rendered by Hugging Face's
// Jinja engine with tools, as transformers' apply_chat_template(messages, tools=…) renders it.
// Usage: node template.mjs NODE_MODULES MODEL_DIR IN OUT
//   IN is [{messages, tools}]; OUT gets the rendered strings, with the generation prompt and
//   enable_thinking=false. A null content is given as "" (the JS engine cannot test null as
//   Python's Jinja does).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nm, modelDir, inPath, outPath] = process.argv.slice(2);
const { Template } = await import(pathToFileURL(path.join(nm, "@huggingface/jinja/dist/index.js")).href);
const config = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
const input = JSON.parse(fs.readFileSync(inPath, "utf8"));
const out = input.map((c) =>
  new Template(config.chat_template).render({
    messages: c.messages.map((m) => ({ ...m, content: m.content ?? "" })),
    tools: c.tools,
    add_generation_prompt: true,
    enable_thinking: false,
  }),
);
fs.writeFileSync(outPath, JSON.stringify(out));
