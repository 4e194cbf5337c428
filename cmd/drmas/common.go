package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/stages"
)

// version is set with -ldflags "-X main.version=…"; otherwise taken from the build info.
var version = ""

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if rev != "" {
			return fmt.Sprintf("%s (%.12s%s, %s)", bi.Main.Version, rev, dirty, bi.GoVersion)
		}
		return fmt.Sprintf("%s (%s)", bi.Main.Version, bi.GoVersion)
	}
	return "unknown"
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the drmas version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "drmas", versionString())
		},
	}
}

// loadConfig resolves the configuration from --config, DRMAS_* and the flags of cmd.
func loadConfig(cmd *cobra.Command) (*configs.Config, error) {
	file, _ := cmd.Flags().GetString("config")
	flags := pflag.NewFlagSet("keys", pflag.ContinueOnError)
	// Only flags the user set override config keys.
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "config" {
			flags.AddFlag(f)
		}
	})
	return configs.Load(configs.LoadOptions{File: file, Flags: flags})
}

// openEnv loads the config and opens the store.
func openEnv(cmd *cobra.Command) (*stages.Env, func(), error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return nil, nil, err
	}
	b, err := stages.OpenStore(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, err
	}
	var prog io.Writer = os.Stderr
	if q, _ := cmd.Flags().GetBool("quiet"); q {
		prog = nil
	}
	env := &stages.Env{Bucket: b, Config: cfg, Log: cmd.ErrOrStderr(), Progress: prog}
	return env, func() { _ = b.Close() }, nil
}

// withEnv adapts a command body that needs the store and config into a cobra RunE: it loads
// the config, opens the store, and closes it when the body returns.
func withEnv(body func(cmd *cobra.Command, env *stages.Env) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		env, done, err := openEnv(cmd)
		if err != nil {
			return err
		}
		defer done()
		return body(cmd, env)
	}
}
