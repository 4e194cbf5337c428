package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// placeFlags are the global flags that choose which config, store and run a command acts on
// (--seed is a config key: a stage run without it would run with the config's seed, and its
// outputs would not be those of the run). A command an error suggests ("run `drmas run-stage
// normalize --iter 3` first") acts on the same run only if it repeats them.
var placeFlags = []string{"config", "store", "run", "seed"}

// placeArgs returns the placeFlags given on cmd's command line, as "--name value" pairs in
// placeFlags order.
func placeArgs(cmd *cobra.Command) [][2]string {
	if cmd == nil {
		return nil
	}
	var args [][2]string
	for _, name := range placeFlags {
		f := cmd.Flags().Lookup(name)
		if f != nil && f.Changed {
			args = append(args, [2]string{"--" + name, f.Value.String()})
		}
	}
	return args
}

// completeHints appends args to every command quoted in msg as `drmas …` that does not
// already give the flag, so that a suggested command, pasted, acts on the same config, store,
// run and seed as the one that failed. The library's errors suggest commands without the flags
// of the invocation (they do not know them); only the CLI does.
func completeHints(msg string, args [][2]string) string {
	if len(args) == 0 || !strings.Contains(msg, "`drmas ") {
		return msg
	}
	parts := strings.Split(msg, "`")
	for i := 1; i < len(parts)-1; i += 2 { // the text between a pair of backquotes
		span := parts[i]
		if !strings.HasPrefix(span, "drmas ") {
			continue
		}
		words := strings.Fields(span)
		for _, a := range args {
			if !given(words, a[0]) {
				span += " " + a[0] + " " + shellQuote(a[1])
			}
		}
		parts[i] = span
	}
	return strings.Join(parts, "`")
}

// given reports whether words contain flag, as "--flag" or "--flag=value".
func given(words []string, flag string) bool {
	for _, w := range words {
		if w == flag || strings.HasPrefix(w, flag+"=") {
			return true
		}
	}
	return false
}

// shellQuote returns s as one POSIX shell word: unchanged when it has only characters no
// shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
