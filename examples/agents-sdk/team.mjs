// A math team on the OpenAI Agents SDK (@openai/agents) with a chat-completions model per
// agent: the solver may hand off to the verifier (a handoff is a function call, which the
// gateway renders and parses as the model's chat template defines); the final output is
// graded by drmas (workflow.reward: math).
// --log FILE appends each reply the client received, as {"agent", "text"} lines.
import OpenAI from 'openai';
import { appendFileSync } from 'node:fs';
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled } from '@openai/agents';

const logFile = process.argv.includes('--log') ? process.argv[process.argv.indexOf('--log') + 1] : null;
setTracingDisabled(true); // no traces leave the machine
const client = new OpenAI();
const task = JSON.parse(process.env.DRMAS_TASK);

// model is the agent's chat-completions model; with --log it records each reply.
function model(agent) {
  const m = new OpenAIChatCompletionsModel(client, agent);
  if (!logFile) return m;
  const getResponse = m.getResponse.bind(m);
  m.getResponse = async (request) => {
    const response = await getResponse(request);
    for (const item of response.output) {
      const text = item.type === 'message' ? item.content.map((c) => c.text ?? '').join('') : '';
      appendFileSync(logFile, JSON.stringify({ agent, text, type: item.type }) + '\n');
    }
    return response;
  };
  return m;
}

const verifier = new Agent({
  name: 'verifier',
  instructions: 'Check the proposed solution and give the final answer in \\boxed{}.',
  model: model('verifier'),
});
const solver = new Agent({
  name: 'solver',
  instructions: 'Solve the problem. Put the final answer in \\boxed{}, or hand off to the verifier to check it.',
  model: model('solver'),
  handoffs: [verifier],
  modelSettings: { maxTokens: 64 },
});
const result = await run(solver, task.question, { maxTurns: 4 });
console.error(`final output from ${result.lastAgent?.name}: ${result.finalOutput}`);
