// A search team on the official openai client: the searcher calls the retriever as a function
// tool (search) until it has what it needs, then the answerer answers in <answer>…</answer>,
// which drmas grades (workflow.reward: search). The retriever here is a keyword match over a
// small corpus in this file (tasks.jsonl asks about it): put your own behind the same tool.
// --log FILE appends each reply the client received, as {"agent", "text"} lines.
import OpenAI from 'openai';
import { appendFileSync } from 'node:fs';

const logFile = process.argv.includes('--log') ? process.argv[process.argv.indexOf('--log') + 1] : null;
const client = new OpenAI();
const task = JSON.parse(process.env.DRMAS_TASK);

const corpus = [
  'Paris is the capital of France.',
  'Berlin is the capital of Germany.',
  'Lisbon is the capital of Portugal.',
  'Mount Everest is the highest mountain on Earth.',
  'The Nile flows into the Mediterranean Sea.',
  'Ada Lovelace wrote the first published computer program.',
  'Canberra is the capital of Australia.',
  'Water boils at 100 degrees Celsius at sea level.',
];

function search({ query }) {
  const words = String(query).toLowerCase().split(/\W+/).filter(Boolean);
  const score = (doc) => words.filter((w) => doc.toLowerCase().includes(w)).length;
  return [...corpus].sort((a, b) => score(b) - score(a)).slice(0, 2).join('\n');
}

const tools = [{
  type: 'function',
  function: {
    name: 'search',
    description: 'Search the knowledge base for passages about a query.',
    parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
  },
}];

async function ask(agent, messages, extra = {}) {
  const r = await client.chat.completions.create({ model: agent, messages, max_tokens: 64, ...extra });
  const msg = r.choices[0].message;
  if (logFile) appendFileSync(logFile, JSON.stringify({ agent, text: msg.content ?? '', tool_calls: msg.tool_calls ?? [] }) + '\n');
  return msg;
}

const messages = [
  { role: 'system', content: 'Find the facts needed to answer the question with the search tool.' },
  { role: 'user', content: task.question },
];
const passages = [];
for (let round = 0; round < 3; round++) {
  const msg = await ask('searcher', messages, { tools });
  messages.push({ role: 'assistant', content: msg.content ?? '', tool_calls: msg.tool_calls });
  if (!msg.tool_calls?.length) break;
  for (const call of msg.tool_calls) {
    let args = {};
    try { args = JSON.parse(call.function.arguments); } catch { /* a malformed call finds nothing */ }
    const found = search(args);
    passages.push(found);
    messages.push({ role: 'tool', tool_call_id: call.id, content: found });
  }
}
await ask('answerer', [{ role: 'user', content:
  `Passages:\n${passages.join('\n') || '(none)'}\nQuestion: ${task.question}\nAnswer in <answer>…</answer>.` }]);
