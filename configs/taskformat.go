package configs

import (
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/workflows"
)

// badTaskFormat reports a tasks.format that is none of workflows.TaskFormats ("" is auto).
func badTaskFormat(f string) bool { return f != "" && !slices.Contains(workflows.TaskFormats, f) }

func taskFormats() string { return "one of " + strings.Join(workflows.TaskFormats, ", ") }
