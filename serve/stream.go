package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/drmas-dev/drmas/actors/openai"
)

// stream answers a request with "stream": true as OpenAI's completions API streams: Server-Sent
// Events, one "data: {…}" chunk per prompt with the text (and log-probs) of the tokens sampled
// since the last chunk, the last with its finish_reason, then "data: [DONE]". The scheduler
// never waits for this handler: it publishes tokens into the request's progress and drops the
// request when more than StreamBacklog wait; a write that blocks for WriteTimeout (a client
// that stopped reading, its socket buffers full) ends the request too.
func (s *Server) stream(w http.ResponseWriter, it *item, req *openai.CompletionRequest) {
	rc := http.NewResponseController(w)
	// A request dropped while a write blocks: end the write now.
	defer context.AfterFunc(it.ctx, func() { _ = rc.SetWriteDeadline(time.Now()) })()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	st := &streamState{s: s, w: w, rc: rc, it: it, req: req, base: s.response(it.pol, req), n: len(it.reqs)}
	st.all, st.off, st.over = make([][]int32, st.n), make([]int, st.n), make([]bool, st.n)
	if err := st.event([]byte(": drmas\n\n")); err != nil { // headers out now
		it.cancel(err)
		return
	}
	for {
		select {
		case <-it.prog.notify:
		case res := <-it.done:
			if res.err != nil {
				st.fail("sample: " + res.err.Error())
				return
			}
		case <-it.ctx.Done():
			return
		case <-s.stopped:
			st.fail("server is shutting down")
			return
		}
		done, err := st.flush()
		if err != nil {
			it.cancel(err)
			return
		}
		if done {
			s.requests.Add(1)
			if err := st.event([]byte("data: [DONE]\n\n")); err != nil {
				it.cancel(err)
			}
			return
		}
	}
}

// streamState is what a streaming handler has written.
type streamState struct {
	s    *Server
	w    http.ResponseWriter
	rc   *http.ResponseController
	it   *item
	req  *openai.CompletionRequest
	base openai.CompletionResponse
	n    int
	// Per prompt: its tokens whose text is not yet written, the text offset of its next
	// token, and whether its last chunk (with finish_reason) was written.
	all  [][]int32
	off  []int
	over []bool
}

// flush writes a chunk for each prompt with new tokens or a new finish reason, and reports
// whether every prompt's last chunk is written.
func (st *streamState) flush() (bool, error) {
	toks, lps, finish := st.it.prog.take()
	done := true
	for i := range st.n {
		if st.over[i] {
			continue
		}
		if herr := finiteRow(i, lps[i]); herr != nil {
			st.fail(herr.msg)
			return false, fmt.Errorf("%s", herr.msg)
		}
		st.all[i] = append(st.all[i], toks[i]...)
		over := finish[i] != ""
		text := st.delta(i, over)
		if len(toks[i]) == 0 && !over {
			done = false
			continue
		}
		c := openai.CompletionChoice{Index: i, Text: text}
		if st.req.Logprobs != nil {
			c.Logprobs, st.off[i] = st.s.logprobs(toks[i], lps[i], st.off[i], st.req)
		}
		if over {
			c.FinishReason, st.over[i] = &finish[i], true
		} else {
			done = false
		}
		chunk := st.base
		chunk.Choices = []openai.CompletionChoice{c}
		b, _ := json.Marshal(chunk)
		if err := st.event(fmt.Appendf(nil, "data: %s\n\n", b)); err != nil {
			return false, err
		}
	}
	return done, nil
}

// delta is prompt i's text not yet written: the text of its tokens since the last delta
// (byte-level tokenizers decode piecewise to the whole's text when cut after a whole
// character). While it runs, a text that ends in a character cut between tokens (an
// incomplete byte sequence, or the U+FFFD a tokenizer made of it) waits for the next token.
func (st *streamState) delta(i int, over bool) string {
	text := st.s.codec.text(st.all[i], skipSpecial(st.req))
	if r, _ := utf8.DecodeLastRuneInString(text); !over && r == utf8.RuneError && text != "" {
		return ""
	}
	st.all[i] = st.all[i][:0]
	return text
}

// event writes one Server-Sent Event within WriteTimeout and flushes it.
func (st *streamState) event(b []byte) error {
	if err := st.it.ctx.Err(); err != nil {
		return err
	}
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.o.WriteTimeout))
	if _, err := st.w.Write(b); err != nil {
		return fmt.Errorf("writing to the client: %w", err)
	}
	if err := st.rc.Flush(); err != nil {
		return fmt.Errorf("writing to the client: %w", err)
	}
	return nil
}

// fail ends the stream with an error event, as vLLM does once the status line is out.
func (st *streamState) fail(msg string) {
	b, _ := json.Marshal(openai.ErrorResponse{Error: openai.ErrorDetail{Message: msg, Type: "InternalServerError", Code: http.StatusInternalServerError}})
	if st.event(fmt.Appendf(nil, "data: %s\n\n", b)) == nil {
		_ = st.event([]byte("data: [DONE]\n\n"))
	}
}
