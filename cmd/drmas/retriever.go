package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/workflows/retriever"
)

func newRetrieverCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "retriever",
		Short: "A Search-R1-style retrieval server (BM25) for the search workflow",
		Long: `Serves the retrieval API the search workflow (and Search-R1's tools) call, with exact BM25
over a JSONL corpus, for small corpora and tests. Point the workflow at it with
workflow.retriever_url (e.g. http://127.0.0.1:8000/retrieve).`,
		Args: cobra.NoArgs,
	})
	cmd.AddCommand(newRetrieverServeCmd())
	return cmd
}

func newRetrieverServeCmd() *cobra.Command {
	var corpus, addr string
	cmd := &cobra.Command{
		Use:   "serve --corpus corpus.jsonl [--addr 127.0.0.1:8000]",
		Short: "Serve POST /retrieve over a JSONL corpus with BM25",
		Long: `Loads a corpus of one {"id": …, "contents": "title\ntext"} JSON object per line (every
unusable line is reported at once) and serves Search-R1's retrieval API until interrupted:

  POST /retrieve {"query": "…"} or {"queries": ["…"]}, "topk": 3, "return_scores": true
  → {"result": [[{"document": {"id": …, "contents": …}, "score": …}, …]]}

Ranking is Okapi BM25 (k1 1.2, b 0.75) over lowercased letter/digit tokens, ties by corpus
order, so the same corpus and query always give the same passages.`,
		Example: `  drmas retriever serve --corpus wiki-small.jsonl --addr 127.0.0.1:8000 &
  curl -s 127.0.0.1:8000/retrieve -d '{"query": "capital of peru", "topk": 2, "return_scores": true}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := retriever.LoadCorpus(corpus)
			if err != nil {
				return fmt.Errorf("--corpus: %w", err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--addr %s: %w (is another server using the port?)", addr, err)
			}
			srv := &http.Server{Handler: retriever.NewServer(docs), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.ErrOrStderr(), "retriever: %d documents from %s on http://%s/retrieve (Ctrl-C stops)\n", len(docs), corpus, ln.Addr())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return err
			case <-cmd.Context().Done():
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				return nil
			}
		},
	}
	cmd.Flags().StringVar(&corpus, "corpus", "", `JSONL corpus, one {"id", "contents"} object per line (required)`)
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8000", "address to listen on")
	_ = cmd.MarkFlagRequired("corpus")
	return cmd
}
