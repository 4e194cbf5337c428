package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/gpu"
	"github.com/drmas-dev/drmas/jobs"
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

// group makes cmd, which only groups subcommands, reject an unknown subcommand with a one-line
// error and a nonzero exit (cobra checks that only for the root command, over several lines:
// others would print their help and exit 0), and print its help when run without one.
func group(cmd *cobra.Command) *cobra.Command {
	// A misspelt subcommand followed by its flags (`run-stage rolout --iter 0`) stays with the
	// group, whose flag parsing fails first: name the unknown command, not the flag.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c == cmd {
			if args := c.Flags().Args(); len(args) > 0 {
				return cmd.Args(c, args)
			}
		}
		return suggestFlag(c, err)
	})
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(": did you mean %s?", strings.Join(s, " or "))
		} else {
			msg += fmt.Sprintf(": see '%s --help'", cmd.CommandPath())
		}
		return errors.New(msg)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return cmd
}

// suggestFlag adds the nearest flags of c to an unknown-flag error (`run --iter 3`: did you
// mean --iters?).
func suggestFlag(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || len(ne.GetSpecifiedName()) < 2 {
		return err
	}
	name := ne.GetSpecifiedName()
	var near []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if (len(name) >= 3 && (strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name))) || configs.EditDistance(name, f.Name) <= min(2, len(name)/2) {
			near = append(near, "--"+f.Name)
		}
	})
	if len(near) == 0 {
		return err
	}
	return fmt.Errorf("%w (did you mean %s? see '%s --help')", err, strings.Join(near, " or "), c.CommandPath())
}

// loadConfig resolves the configuration from --config, DRMAS_* and the flags of cmd.
func loadConfig(cmd *cobra.Command) (*configs.Config, error) {
	cfg, err := loadInterruptibly(cmd.Context(), loadOptions(cmd))
	if err == nil {
		err = gpu.CheckEngineEnv() // read by learn only: refused before the stages before it run
	}
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// loadOptions says where cmd's configuration comes from: --config, DRMAS_* and its flags. It
// warns about DRMAS_* variables that set no config key.
func loadOptions(cmd *cobra.Command) configs.LoadOptions {
	warnUnknownEnv(cmd.ErrOrStderr(), os.Environ())
	file, _ := cmd.Flags().GetString("config")
	flags := pflag.NewFlagSet("keys", pflag.ContinueOnError)
	// Only flags the user set override config keys.
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "config" {
			flags.AddFlag(f)
		}
	})
	return configs.LoadOptions{File: file, Flags: flags}
}

// nonConfigEnv are the DRMAS_* variables that are not config keys: read by the learner, by
// the stages of a Kubernetes Job, or by build and test tooling.
var nonConfigEnv = map[string]bool{
	gpu.EngineEnv: true, jobs.EnvShardCount: true,
	"DRMAS_NVIDIA_TOOLS": true, "DRMAS_NVIDIA_DRIVER_LIBS": true, "DRMAS_TOOLS": true, "DRMAS_PTXAS": true,
	"DRMAS_UPDATE_PTX": true, "DRMAS_DEBIAN_MIRROR": true, "DRMAS_DEBIAN_SECURITY_MIRROR": true,
	"DRMAS_BENCH_STORE": true, "DRMAS_MINIO_BIN": true, "DRMAS_WRITE_FUZZ_SEEDS": true,
	"DRMAS_FAKE_CUDA_CHILD": true, "DRMAS_REAL_CUDA_CHILD": true, "DRMAS_REAL_CUDA_DIR": true, "DRMAS_REAL_NVML_CHILD": true, "DRMAS_STUB_NVML_CHILD": true,
}

// warnUnknownEnv warns, one line each, about the DRMAS_* variables of environ that set no config
// key (nor are in nonConfigEnv): a misspelt one would otherwise be ignored silently.
func warnUnknownEnv(w io.Writer, environ []string) {
	var known []string
	for _, k := range configs.FixedKeys() {
		known = append(known, configs.EnvVar(k))
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "DRMAS_") && !slices.Contains(known, name) && !nonConfigEnv[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		hint := ""
		if s := configs.Closest(name, known, 2); s != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", s)
		} else if strings.HasPrefix(name, "DRMAS_MODELS_") || strings.HasPrefix(name, "DRMAS_AGENTS_") {
			hint = " (models and agents are set in a config file only)"
		}
		fmt.Fprintf(w, "drmas: warning: %s sets no config key: ignored%s\n", name, hint)
	}
}

// openEnv loads the config and opens the store.
func openEnv(cmd *cobra.Command) (*stages.Env, func(), error) {
	cfg, err := loadConfig(cmd)
	if err == nil {
		err = checkMemory(cmd, cfg) // for the stage commands: before the store is opened
	}
	if err != nil {
		return nil, nil, err
	}
	b, err := stages.OpenStore(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, err
	}
	q, _ := cmd.Flags().GetBool("quiet")
	env := &stages.Env{Bucket: b, Config: cfg, Log: cmd.ErrOrStderr(), Progress: progressWriter(q, os.Stderr)}
	return env, func() { _ = b.Close() }, nil
}

// progressWriter is where progress bars are drawn: f when it is a terminal, else nowhere (a
// bar redraws itself with carriage returns, which would fill a log file or a pod's log; the
// stages' one-line summaries still go to the log).
func progressWriter(quiet bool, f *os.File) io.Writer {
	if quiet || f == nil {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return f
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
