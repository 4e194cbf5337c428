package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/internal/refdocs"
)

// referencePages are the generated pages of docs/, by file name.
func referencePages(srcRoot string) (map[string][]byte, error) {
	docs, err := refdocs.FieldDocs(srcRoot)
	if err != nil {
		return nil, err
	}
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	cli, err := refdocs.CLI(root)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"cli.md": cli, "configuration.md": refdocs.Config(docs)}, nil
}

// newDocsCmd is `drmas docs`, hidden: what `make docs` runs in the repository to rewrite the
// reference pages (docs/cli.md, docs/configuration.md) from this binary and the config sources.
func newDocsCmd() *cobra.Command {
	var dir, src string
	var check bool
	cmd := &cobra.Command{
		Use:    "docs",
		Short:  "Rewrite docs/cli.md and docs/configuration.md from this binary (run in the repository)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pages, err := referencePages(src)
			if err != nil {
				return err
			}
			for _, name := range []string{"cli.md", "configuration.md"} {
				path := filepath.Join(dir, name)
				if check {
					old, err := os.ReadFile(path)
					if err != nil || !bytes.Equal(old, pages[name]) {
						return fmt.Errorf("%s is not what this binary prints: run `make docs`", path)
					}
					continue
				}
				if err := os.WriteFile(path, pages[name], 0o644); err != nil {
					return fmt.Errorf("docs: %w", err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), "wrote", path)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "out", "docs", "folder the pages are written to")
	cmd.Flags().StringVar(&src, "src", ".", "the repository's top folder (the config sources' comments)")
	cmd.Flags().BoolVar(&check, "check", false, "only check that the pages are current")
	return cmd
}
