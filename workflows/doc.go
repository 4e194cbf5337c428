// Package workflows holds the multi-agent workflows of drmas as pure text
// state machines: no model code lives here. A workflow says which agent acts
// next and with what prompt, parses that agent's response into an action,
// advances the episode, and grades the outcome.
//
// # Contract
//
// A [Workflow] creates an [Episode] per [Task]. The rollout loop is:
//
//	ep := wf.NewEpisode(task)
//	for {
//		turn, ok := ep.Next() // who acts, at which step, with which prompt
//		if !ok {
//			break
//		}
//		valid := ep.Act(generate(turn.Agent, turn.Prompt))
//		// record the row: turn.Agent, turn.Step, valid, ...
//	}
//	reward := ep.Reward()
//	// each row's score: RowScore(reward, valid, wf.InvalidPenalty())
//
// Promises made by every workflow in this package:
//
//   - Episodes are deterministic: the same task and the same responses give
//     the same turns, prompts and reward. Episodes hold no randomness.
//   - Every prompt of an agent in the compact format (the built-in model's) is
//     at most [PromptBudget] bytes for any sequence of
//     responses (responses are never echoed raw: the parsed, canonical action
//     is shown instead), and every expert response from Demonstrations of a
//     generated task is at most [ResponseBudget] bytes, so prompt + response
//     fit a 256-byte context (a dataset task's answer is replayed as it is; a search against a
//     retrieval server shows passages of up to passage_bytes each instead, see RetrieverOptions).
//   - Turn.Step is the environment step (math: loop index; search: retrieval
//     step), and within one step agents act in the order of Agents(), so rows
//     sorted by (step, agent order) are in chronological order.
//   - A response that does not parse as a legal action is "invalid": Act
//     returns false, the episode still advances with a documented fallback
//     action, and the row's score loses InvalidPenalty.
//   - Next may be called repeatedly without Act and returns the same turn;
//     Act on a finished episode is ignored and returns false.
//   - Tasks(seed, split, n) is deterministic in (options, seed, split, n), and
//     train and eval items never overlap: an item's split is a fixed function
//     of its question text ([SplitOf]), so no question can be drawn for both.
//   - Demonstrations replay the expert policy through a real episode, so the
//     demos are exactly the turns the episode would show; with noise 0 the
//     episode reaches reward 1 for every generated task.
//   - Workflows and episodes from different goroutines do not share mutable
//     state: a Workflow is safe for concurrent use, an Episode is not.
//
// # Formats
//
// Each agent has a format, chosen by [Options.PaperAgents]: the compact format (parse.go), for
// the built-in byte-level model, or the paper format (paper.go), for Hugging Face models, in
// which prompts are the natural-language instructions of the paper's orchestrations and actions
// are tags: \boxed{…}, <verify>…</verify>, <search>…</search>, <answer>…</answer>. Paper prompts
// show the question up to [PaperQuestionBytes] and a teammate's response up to its last
// [PaperResponseBytes], so their length is bounded too. Agents of both formats can share an
// episode: each sees its own prompts and is parsed by its own rules.
//
// # Workflows
//
// "math" (agents solver, verifier): see [NewMath]. "math_critic" (agents solver, critic,
// refiner, verifier, on math's tasks): see [MathCritic]. "search" (agents router,
// searcher, answerer): see [NewSearch]. "program" (the config's agents; package
// workflows/program, options [ProgramOptions]) is a user's agent program, whose episodes the
// rollout stage runs as processes against package gateway rather than as an [Episode]. The BM25 retriever and the synthetic
// fact corpus live in package workflows/retriever.
//
// # Adding a workflow
//
// Adding a third workflow means adding one file to this package (or one
// package that the binary imports for its side effects) whose init calls
// [Register] with a constructor taking [Options]; nothing else changes.
// Settings it needs go into [Options] with a default in [DefaultOptions]
// and a check in [Options.Validate].
//
// Randomness: generators and demonstrations use math/rand/v2.
package workflows
