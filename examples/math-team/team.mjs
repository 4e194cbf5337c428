// A math team of two agents on the official openai client: the solver answers, the verifier
// checks (streamed), and the solver gives its final answer in \boxed{}. drmas grades that
// final answer (workflow.reward: math). Run by drmas once per episode: OPENAI_BASE_URL and
// OPENAI_API_KEY point at the episode's gateway, DRMAS_TASK holds the task.
// --log FILE appends each reply the client received, as {"agent", "text"} lines.
import OpenAI from 'openai';
import { appendFileSync } from 'node:fs';

const logFile = process.argv.includes('--log') ? process.argv[process.argv.indexOf('--log') + 1] : null;
const client = new OpenAI();
const task = JSON.parse(process.env.DRMAS_TASK);

function record(agent, text) {
  if (logFile) appendFileSync(logFile, JSON.stringify({ agent, text }) + '\n');
  return text;
}

async function ask(agent, messages) {
  const r = await client.chat.completions.create({ model: agent, messages, max_tokens: 64 });
  return record(agent, r.choices[0].message.content ?? '');
}

async function askStreamed(agent, messages) {
  const stream = await client.chat.completions.create({ model: agent, messages, max_tokens: 64, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  return record(agent, text);
}

const solver = [
  { role: 'system', content: 'You are a careful math solver. Put the final answer in \\boxed{}.' },
  { role: 'user', content: task.question },
];
const draft = await ask('solver', solver);
const verdict = await askStreamed('verifier', [
  { role: 'user', content: `Question: ${task.question}\nProposed solution: ${draft}\nIs it correct? Answer <verify>yes</verify> or <verify>no</verify>.` },
]);
await ask('solver', [...solver, { role: 'assistant', content: draft },
  { role: 'user', content: `A reviewer said: ${verdict}\nGive your final answer in \\boxed{}.` }]);
