// Greedy decoding of token-id prompts with llama.cpp through node-llama-cpp, timed.
// Usage: node decode.mjs REQUEST.json  (prints one JSON object on stdout)
// The request: {model, prompts: [[ids]], new, threads, reps, batches: [1, 8], kv: "F32"}.
// A batch of b decodes prompts[0..b) as b sequences of one context, which node-llama-cpp
// evaluates together in one llama_decode per step.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {readFileSync} from "node:fs";

const req = JSON.parse(readFileSync(process.argv[2], "utf8"));
const llama = await getLlama({
    gpu: false, build: "never", maxThreads: req.threads, logLevel: LlamaLogLevel.error, progressLogs: false,
});
// The weights are read into memory, as drmas holds its own: mapped from the file instead, F32
// decode ran 10x slower on a VM whose page cache fought the mapping (0.9 against 10.6 tokens/s).
const model = await llama.loadModel({modelPath: req.model, gpuLayers: 0, useMmap: false});

// generate feeds prompt and returns the first n greedy tokens (an end-of-generation token
// does not stop it: drmas's decode does not stop either).
async function generate(seq, prompt, n) {
    const out = [];
    if (n <= 0) return out;
    for await (const t of seq.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
        out.push(t);
        if (out.length >= n) break;
    }
    return out;
}

function cpuSeconds() {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
}

const runs = [];
for (const b of req.batches) {
    const longest = Math.max(...req.prompts.slice(0, b).map((p) => p.length));
    const context = await model.createContext({
        contextSize: longest + req.new + 8,
        sequences: b,
        threads: {ideal: req.threads, min: req.threads},
        flashAttention: false,
        experimentalKvCacheKeyType: req.kv,
        experimentalKvCacheValueType: req.kv,
    });
    const seqs = [];
    for (let i = 0; i < b; i++) seqs.push(context.getSequence());
    const run = {batch: b, seconds: [], cpu_seconds: [], tokens: []};
    for (let r = 0; r < req.reps; r++) {
        for (const s of seqs) await s.clearHistory();
        const t0 = performance.now(), c0 = cpuSeconds();
        run.tokens = await Promise.all(seqs.map((s, i) => generate(s, req.prompts[i], req.new)));
        run.seconds.push((performance.now() - t0) / 1000);
        run.cpu_seconds.push(cpuSeconds() - c0);
        process.stderr.write(`llama.cpp: batch ${b}, repetition ${r + 1}: ${run.seconds.at(-1).toFixed(2)} s\n`);
    }
    runs.push(run);
    await context.dispose();
}
await model.dispose();
process.stdout.write(JSON.stringify({runs, threads: req.threads}) + "\n");
