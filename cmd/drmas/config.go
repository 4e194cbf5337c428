package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/drmas-dev/drmas/configs"
)

func newConfigCmd() *cobra.Command {
	cmd := group(&cobra.Command{Use: "config", Short: "Inspect configuration"})
	var format string
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the resolved configuration (flags > DRMAS_* env > file > defaults), secrets redacted",
		Example: `  drmas --config my.yaml config show --format json
  DRMAS_LEARN_LR=3e-4 drmas --run lr3 config show`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			return printConfig(cmd, cfg.Redacted(), format)
		},
	}
	show.Flags().StringVar(&format, "format", "yaml", "output format: yaml or json")
	defaults := &cobra.Command{
		Use:     "default",
		Short:   "Print the embedded default config file, a starting point for your own",
		Example: "  drmas config default > my.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(configs.DefaultYAML())
			return err
		},
	}
	cmd.AddCommand(show, defaults)
	return cmd
}

func printConfig(cmd *cobra.Command, cfg *configs.Config, format string) error {
	// A config file's form, so that what is printed loads back (durations with their units).
	doc, err := cfg.Document(format)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	case "yaml":
		out, err := yaml.Marshal(doc)
		if err != nil {
			return fmt.Errorf("encode config: %w", err)
		}
		fmt.Fprint(cmd.OutOrStdout(), string(out))
	default:
		return fmt.Errorf("unknown --format %q: use yaml or json", format)
	}
	return nil
}
