package workflows

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/drmas-dev/drmas/workflows/mathgrade"
	"github.com/drmas-dev/drmas/workflows/retriever"
)

// The paper format is the prompt and response format of the paper's orchestrations, for agents
// served by a Hugging Face model (Options.PaperAgents): natural-language instructions, and an
// action inside a tag the model writes at the end of its reasoning. The serving side wraps each
// prompt as one chat turn (actors.Chat); the workflow only writes the text and reads the decoded
// response. The built-in byte-level model keeps the compact format (parse.go).
//
//	solver    … \boxed{<answer>}            the last \boxed{…} (mathgrade.Extract), not empty
//	verifier  … <verify>approve</verify>    or <verify>reject</verify>
//	router    … <verify>yes</verify>        yes: enough information (the answerer answers);
//	                                        no: search more
//	searcher  … <search>query</search>      1..PaperQueryBytes bytes after trimming
//	answerer  … <answer>text</answer>       1..PaperAnswerBytes bytes after trimming
//
// Tags are read as ParseTag does: the last complete <name>…</name> block of the response counts
// (a model may quote the format while it reasons), tag names and the keywords approve, reject,
// yes and no are matched without regard to ASCII case, and the content is trimmed of white
// space. A block whose content holds another tag of the same name (nested or unbalanced tags) is
// invalid, and so is a missing or empty block. As mathgrade does for \boxed, when the response
// has a reasoning block, only the text after its first </think> is read.

// Bounds on what a paper-format prompt shows, so that its length is bounded whatever the
// responses: the question, cut on a rune boundary; a teammate's response, of which the end is
// kept (the final answer or verdict is there); a search query and an answer, beyond which the
// action is invalid. Passages are bounded by the retriever (passage_bytes, or the corpus's
// short facts) and their number by SearchContextPassages.
const (
	PaperQuestionBytes = 2048
	PaperResponseBytes = 4096
	PaperQueryBytes    = 256
	PaperAnswerBytes   = 256
)

// paperCut marks a shown response whose beginning was cut.
const paperCut = "[…] "

// paperAgents is the set of agents that use the paper format.
type paperAgents map[string]bool

func (o Options) paperSet() paperAgents {
	if len(o.PaperAgents) == 0 {
		return nil
	}
	s := paperAgents{}
	for _, a := range o.PaperAgents {
		s[a] = true
	}
	return s
}

// paperProblems lists PaperAgents entries that are empty or repeated, as Options.Problems does.
func (o Options) paperProblems() []error {
	var errs []error
	seen := map[string]bool{}
	for _, a := range o.PaperAgents {
		switch {
		case a == "":
			errs = append(errs, fmt.Errorf("paper_agents: an empty agent name"))
		case seen[a]:
			errs = append(errs, fmt.Errorf("paper_agents: %q named twice", a))
		}
		seen[a] = true
	}
	return errs
}

// checkPaperAgents reports a PaperAgents entry that the workflow does not run.
func (o Options) checkPaperAgents(workflow string, agents []string) error {
	for _, a := range o.PaperAgents {
		if !slices.Contains(agents, a) {
			return fmt.Errorf("paper_agents: workflow %s has no agent %q (its agents: %s)", workflow, a, strings.Join(agents, ", "))
		}
	}
	return nil
}

// ParseTag returns the trimmed content of the last complete <name>…</name> block of resp (see
// the package's paper format for the rules). ok is false when there is none, when it is empty,
// or when it holds another <name> or </name>.
func ParseTag(resp, name string) (content string, ok bool) {
	resp = afterThink(resp)
	open, close := "<"+name+">", "</"+name+">"
	lower := asciiLower(resp) // same byte offsets as resp
	end := strings.LastIndex(lower, asciiLower(close))
	if end < 0 {
		return "", false
	}
	start := strings.LastIndex(lower[:end], asciiLower(open))
	if start < 0 {
		return "", false
	}
	inner := lower[start+len(open) : end]
	if strings.Contains(inner, asciiLower(close)) {
		return "", false // unbalanced or nested: <t>a</t>b</t>, <t><t>a</t></t>
	}
	content = strings.TrimSpace(resp[start+len(open) : end])
	return content, content != ""
}

// afterThink is the text mathgrade.Extract reads: after the first </think>, up to a second.
func afterThink(resp string) string {
	if _, after, found := strings.Cut(resp, "</think>"); found {
		resp, _, _ = strings.Cut(after, "</think>")
	}
	return resp
}

// asciiLower lowercases ASCII letters only, so that byte offsets do not move.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// parseKeyword reads a tag whose content must be one of two keywords (any ASCII case).
func parseKeyword(resp, name, yes, no string) (isYes, ok bool) {
	c, ok := ParseTag(resp, name)
	switch {
	case !ok:
		return false, false
	case strings.EqualFold(c, yes):
		return true, true
	case strings.EqualFold(c, no):
		return false, true
	}
	return false, false
}

// ParsePaperVerifier reads a paper-format verifier response: <verify>approve</verify> or
// <verify>reject</verify>.
func ParsePaperVerifier(resp string) (approve, ok bool) {
	return parseKeyword(resp, "verify", "approve", "reject")
}

// ParsePaperRouter reads a paper-format router response: <verify>yes</verify> (the information
// is enough) or <verify>no</verify> (search more).
func ParsePaperRouter(resp string) (enough, ok bool) {
	return parseKeyword(resp, "verify", "yes", "no")
}

// ParsePaperSearcher reads a paper-format searcher response <search>query</search> and returns
// the query with white space and control characters collapsed to single spaces.
func ParsePaperSearcher(resp string) (string, bool) {
	return parseText(resp, "search", PaperQueryBytes)
}

// ParsePaperAnswerer reads a paper-format answerer response <answer>text</answer> and returns
// the answer normalized as NormalizeAnswer does.
func ParsePaperAnswerer(resp string) (string, bool) {
	a, ok := parseText(resp, "answer", PaperAnswerBytes)
	if !ok {
		return "", false
	}
	a = NormalizeAnswer(a)
	return a, a != ""
}

// parseText reads a tag with free text of at most max bytes, valid UTF-8, with runs of white
// space and control characters collapsed to one space.
func parseText(resp, name string, max int) (string, bool) {
	c, ok := ParseTag(resp, name)
	if !ok || len(c) > max || !utf8.ValidString(c) {
		return "", false
	}
	c = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, c)), " ")
	return c, c != ""
}

// ParsePaperSolver reads a paper-format solver response: the content of its last \boxed{…}
// (mathgrade.Extract), which must not be empty.
func ParsePaperSolver(resp string) (string, bool) {
	b, ok := mathgrade.Extract(resp)
	b = strings.TrimSpace(b)
	return b, ok && b != ""
}

// paperText makes text safe to show in a paper prompt: valid UTF-8, control characters other
// than newline and tab as spaces, trimmed.
func paperText(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD")))
}

// paperQuestion is a question as paper prompts show it: cut to PaperQuestionBytes.
func paperQuestion(q string) string {
	s := paperText(q)
	if len(s) <= PaperQuestionBytes {
		return s
	}
	cut := PaperQuestionBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut])
}

// paperResponse is a teammate's response as paper prompts show it: its last PaperResponseBytes
// bytes (the conclusion is at the end), marked when cut.
func paperResponse(r string) string {
	s := paperText(r)
	if s == "" {
		return "(empty)"
	}
	if len(s) <= PaperResponseBytes {
		return s
	}
	cut := len(s) - PaperResponseBytes
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return paperCut + s[cut:]
}

// Math prompts. The solver's retry prompt shows the rejected solution and the verifier's
// response, as the paper's agents see their teammates' outputs.
const (
	paperMathTeam = "You are a member of a team of two agents that solves math problems: " +
		"the Solver Agent solves the problem and the Verifier Agent checks the solution.\n\n"
	paperSolverRole = "You are the Solver Agent. Reason through the problem step by step, then " +
		"give your final answer within \\boxed{}."
	paperSolverRetry = "You are the Solver Agent. The Verifier Agent rejected your previous solution. " +
		"Reason through the problem again step by step, correct any mistake, then give your final " +
		"answer within \\boxed{}."
	paperVerifierRole = "You are the Verifier Agent. Check each step of the solution and its final " +
		"answer. At the end of your response, give your verdict: <verify>approve</verify> if the " +
		"solution and its final answer are correct, or <verify>reject</verify> if you find any error."
)

func paperSolverPrompt(question, rejected, critique string, retry bool) string {
	if !retry {
		return paperMathTeam + "Math problem: " + question + "\n\n" + paperSolverRole + "\n"
	}
	return paperMathTeam + "Math problem: " + question + "\n\nYour previous solution:\n" + rejected +
		"\n\nThe Verifier Agent's review:\n" + critique + "\n\n" + paperSolverRetry + "\n"
}

func paperVerifierPrompt(question, solution string) string {
	return paperMathTeam + "Math problem: " + question + "\n\nThe Solver Agent's solution:\n" + solution +
		"\n\n" + paperVerifierRole + "\n"
}

// Search prompts: the team, the question, the queries so far and the visible passages (as a
// retrieval server's "Doc i: …" lines), then the agent's instruction.
const (
	paperSearchTeam = "You are a member of a team of three agents that answers questions with a " +
		"search engine: the Router Agent decides whether the team has enough information, the " +
		"Search Agent writes search queries, and the Answer Agent gives the final answer.\n\n"
	paperRouterRole = "You are the Router Agent. Decide whether the retrieved passages and your own " +
		"knowledge are enough to answer the question. At the end of your response, give your " +
		"decision: <verify>yes</verify> if they are enough, or <verify>no</verify> if the team must " +
		"search for more."
	paperSearcherRole = "You are the Search Agent. Write one search query for the information that " +
		"is still missing, in the form <search>your query</search>."
	paperAnswererRole = "You are the Answer Agent. Answer the question in a few words, without " +
		"explanation, within <answer> and </answer>, for example <answer>Paris</answer>."
)

func (e *searchEpisode) paperPrompt(agent string) string {
	var b strings.Builder
	b.WriteString(paperSearchTeam)
	b.WriteString("Question: " + e.full + "\n\n")
	fmt.Fprintf(&b, "Step %d of at most %d.\n\nSearch queries so far:\n", e.step+1, e.w.opts.MaxSteps)
	if len(e.queries) == 0 {
		b.WriteString("(none)\n")
	}
	for i, q := range e.queries {
		b.WriteString(strconv.Itoa(i+1) + ". " + q + "\n")
	}
	b.WriteString("\nRetrieved passages:\n")
	var ps []retriever.Passage
	for _, d := range e.visible() {
		if d >= 0 {
			ps = append(ps, retriever.Passage{Contents: e.w.index.Doc(d)})
		} else {
			ps = append(ps, retriever.Passage{Contents: paperText(e.remote[-1-d])})
		}
	}
	if len(ps) == 0 {
		b.WriteString("(none)\n")
	}
	b.WriteString(retriever.FormatPassages(ps))
	b.WriteString("\n")
	switch agent {
	case AgentRouter:
		b.WriteString(paperRouterRole)
	case AgentSearcher:
		b.WriteString(paperSearcherRole)
	default:
		b.WriteString(paperAnswererRole)
	}
	b.WriteString("\n")
	return b.String()
}

// Expert responses in the paper format, for Demonstrations: the action alone, or for the solver
// one sentence ending in the boxed answer.
func paperSolverDemo(answer string) string { return `The final answer is \boxed{` + answer + "}." }

func paperKeywordDemo(yes bool, y, n string) string {
	if yes {
		return "<verify>" + y + "</verify>"
	}
	return "<verify>" + n + "</verify>"
}

func paperSearchDemo(q string) string { return "<search>" + q + "</search>" }
func paperAnswerDemo(a string) string { return "<answer>" + a + "</answer>" }
